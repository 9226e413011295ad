import { createRequire } from 'node:module';
import type { ConnectionOptions, PostgresConnectionOptions } from 'bullmq';
import type { Config } from '../config/config-type.js';
import { hostOf } from '../config/connection-url.js';
import { FeedsyncError } from '../errors.js';
import { clearDemoPrefix, resetDemoQueueSchema } from '../queue/demo-queues.js';
import { createPgPublisher } from '../queue/pg-publisher.js';
import { PG_QUEUE_NEEDS, probeQueueConnection } from '../queue/pg-queue-probe.js';
import {
  assertQueueSchema,
  migrateQueues,
  type PgQueueSettings,
  pgQueueConnection,
} from '../queue/pg-queues.js';
import type { Publisher } from '../queue/publisher.js';
import { createRedisPublisher } from '../queue/redis-publisher.js';
import type { JobOptions } from '../queue/routes.js';
import { redisUnreachable } from '../redis/unreachable.js';
import { connectForWorkers, type WorkerConnection } from '../redis/worker-connection.js';

// BullMQ is loaded when a consumer runs, as the publisher loads it: a bundle does not follow createRequire.
const require = createRequire(import.meta.url);

// QUEUE_BACKEND is read here and nowhere else outside src/config/: queueStoreFor picks
// Redis or Postgres once, and what differs between the two (down to the demo's sentences
// and doctor's checks) is a method of the object it returns (as BullMQ's own backend
// object, chosen once and given to Queue and Worker).

/** What queueStoreFor reads, in the Config and in the consumer's settings alike. */
export interface QueueStoreSettings {
  readonly redis: Config['redis'];
  readonly queues: Pick<Config['queues'], 'backend' | 'databaseUrl' | 'prefix'>;
}

/** The publisher's waits: its longest wait for the store, and the signal that stops its reconnecting. */
export interface PublisherWaits {
  timeoutMs?: number;
  stopping?: AbortSignal;
}

/** Where the consumer's Workers take their jobs from. */
export interface WorkersConnection {
  readonly connection: ConnectionOptions | PostgresConnectionOptions;
  /** BullMQ's Postgres backend, when the queues are in Postgres. */
  readonly backend?: typeof import('bullmq').createPostgresBackend;
  /** The Redis connection made here (none given), which the consumer ends at close(). */
  readonly made?: WorkerConnection;
}

/** How the consumer wants its Workers' connection. */
export interface WorkersConnectionOptions {
  /** The application's own connection: used as it is, nothing checked. */
  given: ConnectionOptions | PostgresConnectionOptions | undefined;
  prefix: string;
  concurrency: number;
  connectTimeoutMs: number;
}

/** The demo consumer's pool on Postgres queues: its size, wait and name in pg_stat_activity. */
export type ConsumerPool = Parameters<typeof pgQueueConnection>[1];

/** What a consumer is given besides its handlers to reach the queues: nothing in Redis (REDIS_* as the consumer reads them). */
export interface ConsumerQueues {
  readonly connection?: PostgresConnectionOptions;
  /** The environment the consumer reads its queues' settings from, in place of process.env. */
  readonly env?: Record<string, string>;
}

/** The queues' store, Redis or Postgres: everything that differs between the two. */
export interface QueueStore {
  /** Where the jobs are, as a sentence names it: `Redis`, or `the queues` (in Postgres). */
  readonly holder: string;
  /** The queues' place, as `doctor` shows it: `prefix "…"` in Redis, `schema "…"` in Postgres. */
  readonly place: string;
  /** Where the queues are, as the demo's first line says: the Redis, or the Postgres, and its host. */
  readonly located: string;
  /** QUEUE_PREFIX of the demo where it is not given: a key prefix in Redis, a schema's name in Postgres. */
  readonly demoPrefix: string;
  /** What the demo's fresh start does to the queues, as its step 0 says it. */
  readonly demoDrops: string;
  /** A queue's name as BullMQ's tools show it: `prefix:queue` in Redis, `schema.queue` in Postgres. */
  queueName(queue: string): string;
  /** What `doctor` adds after a variable that is set: why it is read by nothing, or nothing. */
  unusedNote(variable: string): string;
  /** The one of `choices` for this store: for a caller that keeps something of its own for each (doctor's checks). */
  pick<T>(choices: { readonly redis: T; readonly postgres: T }): T;
  /** A publisher on this store, its jobs added with `jobOptions`; its `pings` is the name /readyz gives it. */
  publisher(jobOptions: JobOptions, waits?: PublisherWaits): Publisher;
  /** Fails (QUEUE_NOT_MIGRATED) unless the queues' schema is at this BullMQ's version; nothing in Redis. */
  assertSchema(timeoutMs: number): Promise<void>;
  /** Brings the queues' schema up to date, and says where and at which version; null in Redis (nothing to migrate). */
  migrate(timeoutMs: number): Promise<{ schema: string; version: number } | null>;
  /** The consumer's Workers' connection, checked (or connected) once, to fail fast. */
  workersConnection(opts: WorkersConnectionOptions): Promise<WorkersConnection>;
  /** How a consumer of this process (the demo's) reaches these queues, its pool as `pool` says. */
  consumerQueues(pool: ConsumerPool): ConsumerQueues;
  /**
   * Empties the demo's queues for a fresh start, unless they hold what the demo did not
   * make (DEMO_REFUSED); with `onlyCheck`, the refusal alone: nothing is dropped.
   */
  resetDemo(onlyCheck: boolean): Promise<void>;
}

/** The one choice of QUEUE_BACKEND; `holder` and `place` name the store in sentences. */
export function queueStoreFor(settings: QueueStoreSettings): QueueStore {
  return settings.queues.backend === 'postgres' ? new PgQueueStore(settings) : new RedisQueueStore(settings);
}

/** `queues` moved into the Postgres at `url`: the demo's own Postgres holds its queues too, so that it needs no Redis. */
export function queuesInPostgres<Q extends QueueStoreSettings['queues']>(queues: Q, url: string): Q {
  return { ...queues, backend: 'postgres', databaseUrl: url };
}

/** The queues' database and schema with QUEUE_BACKEND=postgres: QUEUE_DATABASE_URL and QUEUE_PREFIX. */
export function pgQueuesOf(settings: Pick<QueueStoreSettings, 'queues'>): PgQueueSettings {
  return { url: settings.queues.databaseUrl, schema: settings.queues.prefix };
}

/** How a store is named, in sentences and in BullMQ's tools. */
interface StoreNames {
  readonly holder: string;
  readonly demoPrefix: string;
  /** What QUEUE_PREFIX is in this store: `prefix` (of keys) or `schema`. */
  readonly prefixIs: string;
  /** What stands between the prefix and a queue's name. */
  readonly separator: string;
}

/** What the two stores share: their settings, and the names built alike from them. */
abstract class BaseQueueStore implements QueueStore {
  readonly holder: string;
  readonly demoPrefix: string;
  abstract readonly located: string;
  abstract readonly demoDrops: string;

  constructor(
    protected readonly settings: QueueStoreSettings,
    private readonly names: StoreNames,
  ) {
    this.holder = names.holder;
    this.demoPrefix = names.demoPrefix;
  }

  /** QUEUE_PREFIX: the key prefix, or the schema. */
  protected get prefix(): string {
    return this.settings.queues.prefix;
  }

  get place(): string {
    return `${this.names.prefixIs} "${this.prefix}"`;
  }

  queueName(queue: string): string {
    return `${this.prefix}${this.names.separator}${queue}`;
  }

  abstract unusedNote(variable: string): string;
  abstract pick<T>(choices: { readonly redis: T; readonly postgres: T }): T;
  abstract publisher(jobOptions: JobOptions, waits?: PublisherWaits): Publisher;
  abstract assertSchema(timeoutMs: number): Promise<void>;
  abstract migrate(timeoutMs: number): Promise<{ schema: string; version: number } | null>;
  abstract workersConnection(opts: WorkersConnectionOptions): Promise<WorkersConnection>;
  abstract consumerQueues(pool: ConsumerPool): ConsumerQueues;
  abstract resetDemo(onlyCheck: boolean): Promise<void>;
}

/** The queues in Redis (REDIS_URL, a cluster or Sentinel) under QUEUE_PREFIX. */
class RedisQueueStore extends BaseQueueStore {
  constructor(settings: QueueStoreSettings) {
    super(settings, { holder: 'Redis', demoPrefix: 'feedsync-demo', prefixIs: 'prefix', separator: ':' });
  }

  get located(): string {
    return `the queues in the Redis at ${hostOf(this.settings.redis.url)}`;
  }

  get demoDrops(): string {
    return `deletes the Redis keys that start with "${this.prefix}:" in the Redis at ${hostOf(this.settings.redis.url)}`;
  }

  unusedNote(): string {
    return '';
  }

  pick<T>(choices: { readonly redis: T }): T {
    return choices.redis;
  }

  publisher(jobOptions: JobOptions, waits: PublisherWaits = {}): Publisher {
    return createRedisPublisher({ redis: this.settings.redis, prefix: this.prefix, jobOptions, ...waits });
  }

  async assertSchema(): Promise<void> {}

  async migrate(): Promise<null> {
    return null;
  }

  async workersConnection(opts: WorkersConnectionOptions): Promise<WorkersConnection> {
    if (opts.given !== undefined) return { connection: opts.given };
    const { redis } = this.settings;
    const made = await connectForWorkers(redis, {
      prefix: opts.prefix,
      timeoutMs: opts.connectTimeoutMs,
    }).catch((err: unknown) => {
      throw redisUnreachable(redis, err, opts.connectTimeoutMs);
    });
    return { connection: made.client, made };
  }

  consumerQueues(): ConsumerQueues {
    return {};
  }

  resetDemo(onlyCheck: boolean): Promise<void> {
    return clearDemoPrefix(this.settings.redis, this.prefix, onlyCheck);
  }
}

/** The queues in Postgres (BullMQ's backend) at QUEUE_DATABASE_URL, in the schema QUEUE_PREFIX: no Redis connection at all. */
class PgQueueStore extends BaseQueueStore {
  constructor(settings: QueueStoreSettings) {
    super(settings, {
      holder: 'the queues',
      demoPrefix: 'feedsync_demo_queues',
      prefixIs: 'schema',
      separator: '.',
    });
  }

  get located(): string {
    return `the queues in Postgres at ${hostOf(this.settings.queues.databaseUrl)} (QUEUE_BACKEND=postgres)`;
  }

  get demoDrops(): string {
    return (
      `drops the queues' schema ${this.prefix} in the Postgres at ${hostOf(this.settings.queues.databaseUrl)} ` +
      '(QUEUE_BACKEND=postgres: no Redis)'
    );
  }

  /** Redis settings with the queues in Postgres: set, and read by nothing. */
  unusedNote(variable: string): string {
    return variable.startsWith('REDIS_') ? ' (unused: QUEUE_BACKEND=postgres opens no Redis connection)' : '';
  }

  pick<T>(choices: { readonly postgres: T }): T {
    return choices.postgres;
  }

  publisher(jobOptions: JobOptions, waits: PublisherWaits = {}): Publisher {
    return createPgPublisher({ queues: pgQueuesOf(this.settings), jobOptions, ...waits });
  }

  async assertSchema(timeoutMs: number): Promise<void> {
    await assertQueueSchema(pgQueuesOf(this.settings), timeoutMs);
  }

  async migrate(timeoutMs: number): Promise<{ schema: string; version: number }> {
    const queues = pgQueuesOf(this.settings);
    return { schema: queues.schema, version: await migrateQueues(queues, timeoutMs) };
  }

  /** Postgres: its schema checked first, unless the application gives the connection. */
  async workersConnection(opts: WorkersConnectionOptions): Promise<WorkersConnection> {
    const { createPostgresBackend } = require('bullmq') as typeof import('bullmq');
    const queues = { url: this.settings.queues.databaseUrl, schema: opts.prefix };
    if (opts.given !== undefined) return { connection: opts.given, backend: createPostgresBackend };
    await assertFitForQueues(queues, opts.connectTimeoutMs);
    await assertQueueSchema(queues, opts.connectTimeoutMs);
    const connection = pgQueueConnection(queues, {
      // Each job in hand holds a connection for its moves; the LISTEN connection is apart.
      max: poolPerQueue(opts.concurrency),
      connectTimeoutMs: opts.connectTimeoutMs,
      applicationName: 'feedsync-consumer',
    });
    return { connection, backend: createPostgresBackend };
  }

  /** A pool of the consumer's own, and QUEUE_BACKEND for it to read: it opens no Redis. */
  consumerQueues(pool: ConsumerPool): ConsumerQueues {
    const queues = pgQueuesOf(this.settings);
    return {
      connection: pgQueueConnection(queues, pool),
      env: { QUEUE_BACKEND: 'postgres', QUEUE_DATABASE_URL: queues.url },
    };
  }

  resetDemo(onlyCheck: boolean): Promise<void> {
    return resetDemoQueueSchema(pgQueuesOf(this.settings), this.demoPrefix, onlyCheck);
  }
}

/** The connections of one queue's pool on Postgres queues: a job in hand each, and two to spare. */
const poolPerQueue = (concurrency: number): number => concurrency + 2;

/**
 * Connections a consumer replica opens to the queues' Postgres at most, at `concurrency`:
 * a pool per queue and a LISTEN connection per queue (BullMQ's backend makes one pool per
 * Worker: a pool given to it is read in a schema of BullMQ's own name, so the two queues
 * cannot share one). 38 at the default concurrency. Its own pool comes on top.
 */
export function consumerQueueConnections(concurrency: number): number {
  // Two queues (emails, contacts), each with its pool and its LISTEN connection.
  return 2 * (poolPerQueue(concurrency) + 1);
}

/**
 * Refuses a queues' connection BullMQ's Workers cannot use, as `doctor` finds it: behind
 * a transaction pooler their start-up search_path is lost or their LISTEN hears nothing,
 * and they would log an error for every try (hundreds a second) and consume nothing.
 */
async function assertFitForQueues(queues: PgQueueSettings, timeoutMs: number): Promise<void> {
  const problem = await probeQueueConnection(queues, timeoutMs, 'feedsync-consumer');
  if (problem?.kind === 'unreachable') throw new FeedsyncError(problem.message, { code: 'QUEUE_ERROR' });
  if (problem) {
    throw new FeedsyncError(`QUEUE_DATABASE_URL: ${problem.message}. ${PG_QUEUE_NEEDS}`, {
      code: 'QUEUE_POOLER',
      exitCode: 2,
    });
  }
}
