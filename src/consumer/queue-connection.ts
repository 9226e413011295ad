import { createRequire } from 'node:module';
import type { ConnectionOptions, PostgresConnectionOptions } from 'bullmq';
import type { ConsumerSettings } from '../config/consumer-settings.js';
import { FeedsyncError } from '../errors.js';
import { PG_QUEUE_NEEDS, probeQueueConnection } from '../queue/pg-queue-probe.js';
import { assertQueueSchema, type PgQueueSettings, pgQueueConnection } from '../queue/pg-queues.js';
import { connectForWorkers, type WorkerConnection } from '../redis/worker-connection.js';
import { redisUnreachable } from './redis-failure.js';

// BullMQ is loaded when a consumer runs, as the publisher loads it: a bundle does not follow createRequire.
const require = createRequire(import.meta.url);

/** Where the consumer's Workers take their jobs from. */
export interface QueueConnection {
  readonly connection: ConnectionOptions | PostgresConnectionOptions;
  /** BullMQ's Postgres backend, when the queues are in Postgres. */
  readonly backend?: typeof import('bullmq').createPostgresBackend;
  /** The Redis connection made here (none given), which the consumer ends at close(). */
  readonly made?: WorkerConnection;
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

/**
 * The Workers' connection and backend: Postgres (its schema checked first, unless the
 * application gives the connection) or Redis (connected once, to fail fast, unless given).
 */
export async function queueConnection(opts: {
  settings: Pick<ConsumerSettings, 'redis' | 'queues'>;
  given: ConnectionOptions | PostgresConnectionOptions | undefined;
  prefix: string;
  concurrency: number;
  connectTimeoutMs: number;
}): Promise<QueueConnection> {
  const { settings, given, prefix, concurrency, connectTimeoutMs } = opts;
  if (settings.queues.backend === 'postgres') {
    const { createPostgresBackend } = require('bullmq') as typeof import('bullmq');
    const queues = { url: settings.queues.databaseUrl, schema: prefix };
    if (given === undefined) {
      await assertFitForQueues(queues, connectTimeoutMs);
      await assertQueueSchema(queues, connectTimeoutMs);
    }
    const connection =
      given ??
      pgQueueConnection(queues, {
        // Each job in hand holds a connection for its moves; the LISTEN connection is apart.
        max: poolPerQueue(concurrency),
        connectTimeoutMs,
        applicationName: `feedsync-consumer`,
      });
    return { connection, backend: createPostgresBackend };
  }
  if (given !== undefined) return { connection: given };
  const made = await connectForWorkers(settings.redis, { prefix, timeoutMs: connectTimeoutMs }).catch(
    (err: unknown) => {
      throw redisUnreachable(settings.redis, err, connectTimeoutMs);
    },
  );
  return { connection: made.client, made };
}
