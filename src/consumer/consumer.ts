import { createRequire } from 'node:module';
import type { ConnectionOptions, Job, Worker, WorkerOptions } from 'bullmq';
import type { Pool, PoolClient } from 'pg';
import { type Env, loadConsumerSettings } from '../config/config.js';
import { CONFIG_DEFAULTS } from '../config/config-defaults.js';
import { FeedsyncError } from '../errors.js';
import { createLogger, type Logger } from '../logger.js';
import { connectForWorkers, type WorkerConnection } from '../redis/worker-connection.js';
import { inSpan, linksFrom, SpanKind } from '../tracing/tracing.js';
import { type FeedsyncEvent, type FeedsyncEventType, readEvent, withoutAddresses } from './events.js';
import { checkInbox, inboxTable, migrateInbox, withInbox } from './inbox.js';
import { startPruning } from './pruning.js';

// BullMQ is loaded when a consumer runs, as the publisher loads it: a bundle does not follow createRequire.
const require = createRequire(import.meta.url);

/** The event of one type, as its handler receives it. */
export type EventOfType<T extends FeedsyncEventType> = Extract<FeedsyncEvent, { type: T }>;

/**
 * What to do with each type: called once per event, inside the transaction that
 * records it, with that transaction's client. Write with `db`, not with the pool:
 * writes outside the transaction are not undone with it. A type without a handler
 * completes with no effect.
 */
export type Handlers = {
  readonly [T in FeedsyncEventType]?: (event: EventOfType<T>, db: PoolClient) => Promise<unknown>;
};

export interface ConsumerOptions {
  /** The inbox key, shared by every replica of this consumer: one effect per event per name. */
  name: string;
  /** The application's own pg Pool: the inbox and the handlers' writes. It stays open at close(). */
  pool: Pool;
  handlers: Handlers;
  /** Jobs run at once, per queue (each holds a client of the pool while it runs). Default 4. */
  concurrency?: number;
  /** The schema of the inbox table `feedsync_inbox`. Default `public`. */
  schema?: string;
  /**
   * Redis as BullMQ takes it (an ioredis instance or options). Default: REDIS_URL,
   * REDIS_CLUSTER, REDIS_SENTINELS and REDIS_SENTINEL_NAME, read as feedsync reads them.
   */
  connection?: ConnectionOptions;
  /** Queue names. Default: QUEUE_PREFIX, QUEUE_EMAIL_EVENTS, QUEUE_CONTACT_EVENTS (feedsync's defaults). */
  queues?: { prefix?: string; emailEvents?: string; contactEvents?: string };
  /**
   * Hours an inbox row is kept: at least 7 days, else OUTBOX_RETENTION_HOURS when
   * longer (how far back `feedsync requeue --since` reaches). Default: that.
   */
  retentionHours?: number;
  /**
   * BullMQ's stall settings, as its Worker takes them: how long a job's lock lasts
   * without renewal (`lockDuration`, default 30000 ms: a killed replica's jobs run again
   * this long after), how often locks are checked (`stalledInterval`), and how often a
   * job may stall before it fails for good (`maxStalledCount`, default 1; a job run
   * again after a stall finds its inbox row, so a higher count costs nothing but time).
   */
  stalls?: Pick<WorkerOptions, 'lockDuration' | 'stalledInterval' | 'maxStalledCount'>;
  /** A pino logger. Default: JSON lines on stdout at LOG_LEVEL. No line holds an address. */
  logger?: Logger;
  /** The environment read for what is not given. Default `process.env`, read when createConsumer is called. */
  env?: Env;
}

export interface Consumer {
  /** Creates the inbox table in `schema` if missing. Safe to run from every replica at once. */
  migrate(): Promise<void>;
  /**
   * Consumes both queues until close(); resolves then. Rejects at once when the inbox
   * table is missing (CONSUMER_NOT_MIGRATED) or Redis cannot be reached at start;
   * later outages are waited out (BullMQ reconnects).
   */
  run(): Promise<void>;
  /** Stops taking jobs, lets the jobs in hand finish and commit, stops pruning. Does not end the pool. */
  close(): Promise<void>;
}

/** The shortest time an inbox row is kept: how long BullMQ keeps a completed job (feedsync's default). */
const MIN_RETENTION_HOURS = CONFIG_DEFAULTS.OUTBOX_RETENTION_HOURS;
const CONNECT_TIMEOUT_MS = 10_000;

/**
 * A consumer of feedsync's jobs that applies each event once: for every job, one
 * transaction records `(name, source, event id)` in the inbox and runs the type's
 * handler only if that row is new, then commits; only then does the job complete.
 * A job that comes again finds its row and completes without the handler. A handler
 * that throws rolls back with the row, and BullMQ retries the job (JOB_ATTEMPTS).
 * The consumer has no way to send mail.
 */
export function createConsumer(opts: ConsumerOptions): Consumer {
  if (typeof opts.name !== 'string' || opts.name.length === 0 || opts.name.length > 200) {
    throw new FeedsyncError('name: must be a non-empty string of at most 200 characters', {
      code: 'CONSUMER_BAD_OPTION',
      exitCode: 2,
    });
  }
  const concurrency = opts.concurrency ?? 4;
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new FeedsyncError('concurrency: must be a whole number of at least 1', {
      code: 'CONSUMER_BAD_OPTION',
      exitCode: 2,
    });
  }
  const schema = opts.schema ?? 'public';
  inboxTable(schema);
  const settings = loadConsumerSettings(opts.env);
  const prefix = opts.queues?.prefix ?? settings.queues.prefix;
  const queueNames = [
    opts.queues?.emailEvents ?? settings.queues.emailEvents,
    opts.queues?.contactEvents ?? settings.queues.contactEvents,
  ];
  const retentionHours =
    opts.retentionHours ?? Math.max(MIN_RETENTION_HOURS, settings.queues.outboxRetentionHours);
  const logger = (opts.logger ?? createLogger({ level: settings.logLevel })).child({
    module: 'consumer',
    consumer: opts.name,
  });
  const { pool, handlers, name } = opts;

  let started = false;
  let workers: Worker[] = [];
  let made: WorkerConnection | null = null;
  let stopPruning: (() => Promise<void>) | null = null;
  let closing: Promise<void> | null = null;
  let closed!: () => void;
  const ended = new Promise<void>((resolve) => {
    closed = resolve;
  });

  /**
   * A job in a span of its own trace, linked (not parented) to the commit that stored its
   * event when the job carries that commit's context: a batch of a thousand events does
   * not become one trace of a thousand jobs.
   */
  function processJob(job: Job): Promise<void> {
    return inSpan(
      'handle job',
      {
        'messaging.system': 'bullmq',
        'messaging.destination.name': job.queueName,
        'feedsync.consumer': name,
        'feedsync.event.type': job.name,
        'feedsync.job.attempt': job.attemptsMade + 1,
      },
      (span) => handleJob(job, (applied) => span.setAttribute('feedsync.job.applied', applied)),
      { kind: SpanKind.CONSUMER, links: linksFrom(job.opts.telemetry?.metadata) },
    );
  }

  async function handleJob(job: Job, onApplied: (applied: boolean) => void): Promise<void> {
    const { UnrecoverableError } = require('bullmq') as typeof import('bullmq');
    let event: FeedsyncEvent;
    try {
      event = readEvent(job.data, job.id ?? '?');
    } catch (err) {
      // No retry can mend the job's data: failed at once, kept by BullMQ for a look.
      throw new UnrecoverableError((err as Error).message);
    }
    const handler = handlers[event.type] as
      | ((e: FeedsyncEvent, db: PoolClient) => Promise<unknown>)
      | undefined;
    if (!handler) return;
    const applied = await withInbox(pool, name, event, (db) => handler(event, db), { schema });
    onApplied(applied);
    logger.debug({ job: job.id, type: event.type, applied }, applied ? 'applied' : 'seen before');
  }

  async function start(): Promise<void> {
    const { Worker: BullWorker } = require('bullmq') as typeof import('bullmq');
    await checkInbox(pool, schema);
    let connection = opts.connection;
    if (connection === undefined) {
      made = await connectForWorkers(settings.redis, { prefix, timeoutMs: CONNECT_TIMEOUT_MS });
      connection = made.client;
    }
    if (closing) {
      // close() came while Redis was being reached: nothing to start.
      made?.disconnect();
      made = null;
      return;
    }
    workers = queueNames.map((queue) => {
      const worker = new BullWorker(queue, processJob, {
        ...opts.stalls,
        connection,
        prefix,
        concurrency,
        autorun: false,
      });
      worker.on('failed', (job, err) => {
        const again =
          job !== undefined &&
          job.attemptsMade < (job.opts.attempts ?? 1) &&
          err.name !== 'UnrecoverableError';
        logger.warn(
          { job: job?.id, type: job?.name, attempt: job?.attemptsMade, err: redacted(err) },
          again ? 'job failed, rolled back; BullMQ retries it' : 'job failed for good, rolled back',
        );
      });
      worker.on('error', (err) => logger.error({ queue, err: redacted(err) }, 'worker error'));
      return worker;
    });
    stopPruning = startPruning({ pool, schema, name, hours: retentionHours, logger });
    logger.info({ queues: queueNames, prefix, concurrency }, 'consuming');
    for (const worker of workers) {
      void worker.run().catch((err: unknown) => logger.error({ err: redacted(err) }, 'worker stopped'));
    }
  }

  return {
    migrate: () => migrateInbox(pool, schema),
    async run() {
      if (closing) throw new FeedsyncError('this consumer is closed', { code: 'CONSUMER_CLOSED' });
      if (started) throw new FeedsyncError('this consumer runs already', { code: 'CONSUMER_RUNNING' });
      started = true;
      try {
        await start();
      } catch (err) {
        await release();
        throw err;
      }
      await ended;
    },
    close() {
      closing ??= release().finally(closed);
      return closing;
    },
  };

  /** Workers closed (their jobs in hand finished), pruning stopped, our own Redis connection ended. */
  async function release(): Promise<void> {
    await Promise.all(workers.map((w) => w.close()));
    await stopPruning?.();
    made?.disconnect();
    made = null;
  }
}

/** The error as a log line may hold it: its type, code and message, every address in the message taken out. */
function redacted(err: unknown): Error {
  const source = err instanceof Error ? err : new Error(String(err));
  const clean = new Error(withoutAddresses(source.message));
  clean.name = source.name;
  const code = (source as { code?: unknown }).code;
  if (typeof code === 'string') Object.assign(clean, { code });
  clean.stack = `${clean.name}: ${clean.message}`;
  return clean;
}
