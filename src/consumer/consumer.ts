import { setMaxListeners } from 'node:events';
import type {
  WorkerOptions as BullWorkerOptions,
  ConnectionOptions,
  PostgresConnectionOptions,
  Worker,
} from 'bullmq';
import type { Pool, PoolClient } from 'pg';
import { queueStoreFor } from '../compose/queue-store.js';
import type { Env } from '../config/config-type.js';
import { type ConsumerSettings, loadConsumerSettings } from '../config/consumer-settings.js';
import { VARIABLES } from '../config/fields.js';
import { unknownVariables, warnOnce } from '../config/unknown-variables.js';
import { FeedsyncError } from '../errors.js';
import { createLogger, type Logger } from '../logger.js';
import type { WorkerConnection } from '../redis/worker-connection.js';
import { CONSUMER_DEFAULTS } from './defaults.js';
import type { FeedsyncEvent, FeedsyncEventType } from './events.js';
import { checkInbox, inboxTable, migrateInbox } from './inbox.js';
import { jobProcessor } from './job.js';
import { queueName, retentionHours, settled } from './options.js';
import { guardPool } from './pool-guard.js';
import { startPruning } from './pruning.js';
import { closeWorkers, makeWorkers, runWorkers } from './workers.js';

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
  /**
   * The application's own pg Pool: the inbox and the handlers' writes. It stays open at
   * close(). When it has no 'error' listener, the consumer adds one that logs a lost idle
   * connection, so a Postgres restart does not end the process.
   */
  pool: Pool;
  handlers: Handlers;
  /**
   * Jobs run at once, per queue (each holds a client of the pool while it runs: size the
   * pool for `concurrency + 2` per queue that carries jobs). Default 16.
   */
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
   * Checked at createConsumer: `lockDuration` 1000 to 2^31-1 ms, `stalledInterval` 100 to
   * 2^31-1 ms, `maxStalledCount` 0 to 1,000,000; another key is refused too.
   */
  stalls?: Pick<BullWorkerOptions, 'lockDuration' | 'stalledInterval' | 'maxStalledCount'>;
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
  const { name, concurrency, schema, limits, connectTimeoutMs, closeTimeoutMs, stalls } = settled(opts);
  inboxTable(schema);
  const settings = loadConsumerSettings(opts.env);
  const { prefix, queueNames, keepHours } = queuesAndRetention(opts, settings.queues);
  const logger = (opts.logger ?? createLogger({ level: settings.logLevel })).child({
    module: 'consumer',
    consumer: name,
  });
  warnOnce(unknownVariables(opts.env ?? process.env, VARIABLES), (warning) => logger.warn(warning));
  const { pool, handlers } = opts;
  guardPool(pool, logger);
  // Aborted when close() has waited closeTimeoutMs: the transactions in hand are cut off.
  const cutOff = new AbortController();
  // Each job's transaction listens to it while it runs: up to `concurrency` per queue.
  setMaxListeners(concurrency * queueNames.length, cutOff.signal);

  let started = false;
  let workers: Worker[] = [];
  let made: WorkerConnection | undefined;
  let stopPruning: (() => Promise<void>) | null = null;
  let closing: Promise<void> | null = null;
  let closed!: () => void;
  const ended = new Promise<void>((resolve) => {
    closed = resolve;
  });

  async function start(): Promise<void> {
    await checkInbox(pool, schema);
    const queues = await queueStoreFor(settings).workersConnection({
      given: opts.connection,
      prefix,
      concurrency,
      connectTimeoutMs,
    });
    made = queues.made;
    if (closing) {
      // close() came while Redis was being reached: nothing to start.
      made?.disconnect();
      made = undefined;
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
    workers = makeWorkers({
      queueNames,
      processor,
      queues,
      prefix,
      concurrency,
      stalls,
      logger,
    });
    stopPruning = startPruning({ pool, schema, name, hours: keepHours, ...limits, logger });
    logger.info({ queues: queueNames, prefix, concurrency }, 'consuming');
    runWorkers(workers, logger);
  }

  /**
   * Workers closed (their jobs in hand finished, or cut off after closeTimeoutMs), pruning
   * stopped, our own Redis connection ended.
   */
  async function release(): Promise<void> {
    await closeWorkers(workers, { closeTimeoutMs, cutOff, logger });
    await stopPruning?.();
    made?.disconnect();
    made = undefined;
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
}

/** The queues' prefix and names, and the inbox's retention: as given, else as feedsync reads them. */
function queuesAndRetention(opts: ConsumerOptions, queues: ConsumerSettings['queues']) {
  return {
    prefix: queueName('queues.prefix', opts.queues?.prefix ?? queues.prefix),
    queueNames: [
      queueName('queues.emailEvents', opts.queues?.emailEvents ?? queues.emailEvents),
      queueName('queues.contactEvents', opts.queues?.contactEvents ?? queues.contactEvents),
    ],
    keepHours: retentionHours(
      opts.retentionHours ?? Math.max(CONSUMER_DEFAULTS.minRetentionHours, queues.outboxRetentionHours),
    ),
  };
}
