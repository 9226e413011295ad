import { createRequire } from 'node:module';
import type { ConnectionOptions, PostgresConnectionOptions, Worker, WorkerOptions } from 'bullmq';
import type { Pool, PoolClient } from 'pg';
import { type Env, loadConsumerSettings, VARIABLES } from '../config/config.js';
import { unknownVariables, warnOnce } from '../config/unknown-variables.js';
import { FeedsyncError } from '../errors.js';
import { createLogger, type Logger } from '../logger.js';
import { assertQueueSchema, pgQueueConnection } from '../queue/pg-queues.js';
import { connectForWorkers, type WorkerConnection } from '../redis/worker-connection.js';
import { CONSUMER_DEFAULTS } from './defaults.js';
import { type FeedsyncEvent, type FeedsyncEventType, withoutAddresses } from './events.js';
import { checkInbox, inboxTable, migrateInbox } from './inbox.js';
import { jobProcessor } from './job.js';
import { queueName, retentionHours, settled } from './options.js';
import { startPruning } from './pruning.js';
import { redisUnreachable } from './redis-failure.js';

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
   * The queues' connection as BullMQ takes it. With Redis (QUEUE_BACKEND unset or
   * `redis`): an ioredis instance or options; default REDIS_URL, REDIS_CLUSTER,
   * REDIS_SENTINELS and REDIS_SENTINEL_NAME, read as feedsync reads them. With
   * QUEUE_BACKEND=postgres: a pg pool config carrying `schema`; default
   * QUEUE_DATABASE_URL (else DATABASE_URL) and the schema QUEUE_PREFIX, and no Redis is
   * opened. Either way the queues are where feedsync puts them only if both agree.
   */
  connection?: ConnectionOptions | PostgresConnectionOptions;
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
  /**
   * Milliseconds a job's transaction (its inbox row and the handler) may last: past it,
   * the transaction is rolled back, its connection ended, and the job fails with its
   * retries (CONSUMER_HANDLER_TIMEOUT). Its statements run under the same statement_timeout.
   * Default 30000.
   */
  handlerTimeoutMs?: number;
  /**
   * Milliseconds a statement of a job's transaction (the handler's too), a prune or
   * migrate() waits for a lock (Postgres's lock_timeout); past it, the statement fails:
   * the job is retried, migrate() throws CONSUMER_LOCKED. Default 5000.
   */
  lockTimeoutMs?: number;
  /**
   * Milliseconds run() waits to reach Redis (when it makes the connection itself); past
   * it, run() rejects with REDIS_TIMEOUT naming the address. Default 10000.
   */
  connectTimeoutMs?: number;
  /**
   * Milliseconds close() waits for the jobs in hand; past it, their transactions are
   * rolled back and the jobs come back after their lock (`lockDuration`). Default 25000.
   */
  closeTimeoutMs?: number;
  /** A pino logger. Default: JSON lines on stdout at LOG_LEVEL. No line holds an address. */
  logger?: Logger;
  /** The environment read for what is not given. Default `process.env`, read when createConsumer is called. */
  env?: Env;
}

export interface Consumer {
  /**
   * Creates the inbox table in `schema` if missing. Safe to run from every replica at
   * once; when the table exists it takes no lock, so a replica starting never waits for,
   * nor holds up, the others' jobs.
   */
  migrate(): Promise<void>;
  /**
   * Consumes both queues until close(); resolves then. Rejects at once when the inbox
   * table is missing (CONSUMER_NOT_MIGRATED), the queues' schema in Postgres is not
   * migrated (QUEUE_NOT_MIGRATED), or the queues cannot be reached at start (with
   * Redis, a RedisError naming the variable and the address, REDIS_ERROR or
   * REDIS_TIMEOUT); later outages are waited out (BullMQ reconnects).
   */
  run(): Promise<void>;
  /**
   * Stops taking jobs, lets the jobs in hand finish and commit (for `closeTimeoutMs` at
   * most; then they are rolled back), stops pruning. Does not end the pool.
   */
  close(): Promise<void>;
}

/**
 * A consumer of feedsync's jobs that applies each event once: for every job, one
 * transaction records `(name, source, event id)` in the inbox and runs the type's
 * handler only if that row is new, then commits; only then does the job complete.
 * A job that comes again finds its row and completes without the handler. A handler
 * that throws rolls back with the row, and BullMQ retries the job (JOB_ATTEMPTS).
 * The consumer has no way to send mail.
 */
export function createConsumer(opts: ConsumerOptions): Consumer {
  const { name, concurrency, schema, limits, connectTimeoutMs, closeTimeoutMs } = settled(opts);
  inboxTable(schema);
  const settings = loadConsumerSettings(opts.env);
  const prefix = queueName('queues.prefix', opts.queues?.prefix ?? settings.queues.prefix);
  const queueNames = [
    queueName('queues.emailEvents', opts.queues?.emailEvents ?? settings.queues.emailEvents),
    queueName('queues.contactEvents', opts.queues?.contactEvents ?? settings.queues.contactEvents),
  ];
  const keepHours = retentionHours(
    opts.retentionHours ??
      Math.max(CONSUMER_DEFAULTS.minRetentionHours, settings.queues.outboxRetentionHours),
  );
  const logger = (opts.logger ?? createLogger({ level: settings.logLevel })).child({
    module: 'consumer',
    consumer: name,
  });
  warnOnce(unknownVariables(opts.env ?? process.env, VARIABLES), (warning) => logger.warn(warning));
  const { pool, handlers } = opts;
  // Aborted when close() has waited closeTimeoutMs: the transactions in hand are cut off.
  const cutOff = new AbortController();

  let started = false;
  let workers: Worker[] = [];
  let made: WorkerConnection | null = null;
  let stopPruning: (() => Promise<void>) | null = null;
  let closing: Promise<void> | null = null;
  let closed!: () => void;
  const ended = new Promise<void>((resolve) => {
    closed = resolve;
  });

  /** The Workers' connection and backend: Postgres (its schema checked first) or Redis (connected once, to fail fast). */
  async function queueConnection(): Promise<{
    connection: ConnectionOptions | PostgresConnectionOptions;
    backend?: typeof import('bullmq').createPostgresBackend;
  }> {
    if (settings.queues.backend === 'postgres') {
      const { createPostgresBackend } = require('bullmq') as typeof import('bullmq');
      const queues = { url: settings.queues.databaseUrl, schema: prefix };
      if (opts.connection === undefined) await assertQueueSchema(queues, connectTimeoutMs);
      const connection =
        opts.connection ??
        pgQueueConnection(queues, {
          // Each job in hand holds a connection for its moves; the LISTEN connection is apart.
          max: concurrency + 2,
          connectTimeoutMs,
          applicationName: `feedsync-consumer`,
        });
      return { connection, backend: createPostgresBackend };
    }
    if (opts.connection !== undefined) return { connection: opts.connection };
    made = await connectForWorkers(settings.redis, { prefix, timeoutMs: connectTimeoutMs }).catch(
      (err: unknown) => {
        throw redisUnreachable(settings.redis, err, connectTimeoutMs);
      },
    );
    return { connection: made.client };
  }

  async function start(): Promise<void> {
    const { Worker: BullWorker } = require('bullmq') as typeof import('bullmq');
    await checkInbox(pool, schema);
    const { connection, backend } = await queueConnection();
    if (closing) {
      // close() came while Redis was being reached: nothing to start.
      made?.disconnect();
      made = null;
      return;
    }
    const processor = jobProcessor({
      pool,
      name,
      schema,
      handlers,
      limits: { ...limits, signal: cutOff.signal },
      logger,
    });
    workers = queueNames.map((queue) => {
      const options = { ...opts.stalls, prefix, concurrency, autorun: false };
      const worker = backend
        ? (new BullWorker(
            queue,
            processor,
            { ...options, connection: connection as PostgresConnectionOptions },
            backend,
          ) as unknown as Worker)
        : new BullWorker(queue, processor, { ...options, connection: connection as ConnectionOptions });
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
    stopPruning = startPruning({ pool, schema, name, hours: keepHours, ...limits, logger });
    logger.info({ queues: queueNames, prefix, concurrency }, 'consuming');
    for (const worker of workers) {
      void worker.run().catch((err: unknown) => logger.error({ err: redacted(err) }, 'worker stopped'));
    }
  }

  return {
    migrate: () => migrateInbox(pool, schema, { lockTimeoutMs: limits.lockTimeoutMs }),
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

  /**
   * Workers closed (their jobs in hand finished, or cut off after closeTimeoutMs), pruning
   * stopped, our own Redis connection ended.
   */
  async function release(): Promise<void> {
    const closingWorkers = Promise.all(workers.map((w) => w.close()));
    if (!(await settlesWithin(closingWorkers, closeTimeoutMs))) {
      logger.warn(
        { closeTimeoutMs },
        'jobs still in hand at close: rolled back, they run again after their lock',
      );
      cutOff.abort();
      // The jobs cut off fail at once; recording that in Redis no longer holds close() up for long.
      await settlesWithin(closingWorkers, CUT_OFF_GRACE_MS);
    }
    await stopPruning?.();
    made?.disconnect();
    made = null;
  }
}

/** Milliseconds close() gives the jobs it cut off to be recorded as failed. */
const CUT_OFF_GRACE_MS = 2_000;

/** True when `promise` settles within `ms`, false when the time passes first. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  const settled = promise.then(
    () => true as const,
    () => true as const,
  );
  try {
    return await Promise.race([settled, late]);
  } finally {
    clearTimeout(timer);
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
