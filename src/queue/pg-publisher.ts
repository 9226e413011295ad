import { createRequire } from 'node:module';
import type { PostgresQueueBackend, Queue } from 'bullmq';
import { FeedsyncError } from '../errors.js';
import { withDeadline } from '../redis/deadline.js';
import { assertQueueSchema, type PgQueueSettings, pgQueueConnection, toQueueError } from './pg-queues.js';
import { bulkJobsOf, JOB_STATES, type Publisher, retryAllFailed } from './publisher.js';
import type { JobOptions } from './routes.js';

// BullMQ is loaded on first use: a run with nothing to publish starts without it.
const require = createRequire(import.meta.url);

export interface PgPublisherOptions {
  /** QUEUE_DATABASE_URL and the queues' schema (QUEUE_PREFIX). */
  queues: PgQueueSettings;
  /** Retention, attempts and backoff of every added job (`jobOptionsFor(config.queues)`). */
  jobOptions: JobOptions;
  /**
   * Max wait for a connection, or for one call. Default 5 s. A call waits at most
   * this for a connection and twice this for its statements, then rejects with a
   * QUEUE_TIMEOUT: no call hangs, whatever state the queues' Postgres is in.
   */
  timeoutMs?: number;
  /** Aborted on the first SIGTERM: once a call has failed, no connection is made again (QUEUE_STOPPING). */
  stopping?: AbortSignal;
}

/**
 * Jobs per BullMQ addBulk: one transaction of BullMQ's add_jobs each. Larger batches
 * commit fewer times (the durable write dominates, not the rows).
 */
const BULK_JOBS = 500;
/** Connections of a queue's pool: the relay adds to one queue at a time. */
const POOL_MAX = 2;

/**
 * The publisher over BullMQ's Postgres backend, the same contract as the Redis one:
 * queues made on first use, any failure drops them all, so the next call (the relay's
 * retry) connects afresh. The schema must be migrated (`feedsync migrate`): the first
 * call checks it (QUEUE_NOT_MIGRATED otherwise).
 */
export function createPgPublisher(opts: PgPublisherOptions): Publisher {
  const timeoutMs = opts.timeoutMs ?? 5_000;
  const connection = pgQueueConnection(opts.queues, {
    max: POOL_MAX,
    connectTimeoutMs: timeoutMs,
    applicationName: 'feedsync-publisher',
  });
  let queues: Map<string, Queue> | null = null;
  let failing = false;
  /** The schema's version was found compatible: checked once, before the first call that succeeds. */
  let schemaChecked = false;

  const reset = async (which: Map<string, Queue> | null = queues): Promise<void> => {
    if (!which) return;
    if (queues === which) queues = null;
    await withDeadline(
      Promise.allSettled([...which.values()].map((q) => q.close())),
      timeoutMs,
      'closing the queues',
      expired,
    ).catch(() => {});
  };
  const expired = (): Error =>
    new FeedsyncError(
      `the queues' Postgres (QUEUE_DATABASE_URL): a call did not finish within ${timeoutMs * 2} ms`,
      { code: 'QUEUE_TIMEOUT' },
    );
  const withQueue = async <T>(name: string, fn: (queue: Queue) => Promise<T>): Promise<T> => {
    if (!queues && failing && opts.stopping?.aborted) {
      throw new FeedsyncError(
        "the queues' Postgres: stopping, and the last call failed: not connecting again",
        {
          code: 'QUEUE_STOPPING',
        },
      );
    }
    queues ??= new Map();
    const current = queues;
    try {
      // Before BullMQ's SQL runs: a schema never migrated fails with what to do, not "function does not exist".
      if (!schemaChecked) {
        await withDeadline(
          assertQueueSchema(opts.queues, timeoutMs),
          timeoutMs * 2,
          'the schema check',
          expired,
        );
        schemaChecked = true;
      }
      let queue = current.get(name);
      if (!queue) {
        const { Queue: BullQueue, createPostgresBackend } = require('bullmq') as typeof import('bullmq');
        queue = new BullQueue(
          name,
          { connection, defaultJobOptions: structuredClone(opts.jobOptions) },
          createPostgresBackend,
        ) as unknown as Queue;
        queue.on('error', () => {});
        current.set(name, queue);
      }
      const result = await withDeadline(fn(queue), timeoutMs * 2, 'a queue call', expired);
      failing = false;
      return result;
    } catch (err) {
      failing = true;
      await reset(current);
      throw toQueueError(err);
    }
  };

  return {
    addBulk: (name, jobs) =>
      withQueue(name, async (queue) => {
        for (let i = 0; i < jobs.length; i += BULK_JOBS) {
          await queue.addBulk(bulkJobsOf(jobs.slice(i, i + BULK_JOBS)));
        }
      }),
    present: (name, jobIds) =>
      withQueue(name, async (queue) => {
        // BullMQ has no call that tells many ids at once: one read of its job table.
        const { pool } = (queue.backend as unknown as PostgresQueueBackend).connection;
        const found = new Set<string>();
        for (let i = 0; i < jobIds.length; i += BULK_JOBS) {
          const { rows } = await pool.query<{ id: string }>(
            'select id from job where queue = $1 and id = any($2::text[])',
            [name, jobIds.slice(i, i + BULK_JOBS)],
          );
          for (const row of rows) found.add(row.id);
        }
        return found;
      }),
    retryFailed: (name) => retryAllFailed((fn) => withQueue(name, fn)),
    ping: () =>
      withQueue(opts.queues.schema, async (queue) => {
        const { pool } = (queue.backend as unknown as PostgresQueueBackend).connection;
        await pool.query('select 1');
        return true;
      }).catch(() => false),
    counts: (name) => withQueue(name, (queue) => queue.getJobCounts(...JOB_STATES)),
    close: () => reset(),
  };
}
