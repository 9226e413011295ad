import { createRequire } from 'node:module';
import type { PostgresQueueBackend, Queue } from 'bullmq';
import { withDeadline } from '../deadline.js';
import { FeedsyncError } from '../errors.js';
import { assertQueueSchema, type PgQueueSettings, pgQueueConnection, toQueueError } from './pg-queues.js';
import type { Publisher } from './publisher.js';
import {
  batchesOf,
  bulkJobsOf,
  publisherOn,
  QueueSession,
  type QueueSessionOptions,
  type SessionBackend,
} from './queue-session.js';

// BullMQ is loaded on first use: a run with nothing to publish starts without it.
const require = createRequire(import.meta.url);

export interface PgPublisherOptions extends QueueSessionOptions {
  /** QUEUE_DATABASE_URL and the queues' schema (QUEUE_PREFIX). */
  queues: PgQueueSettings;
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
  const session = new QueueSession(pgBackend(opts, timeoutMs), timeoutMs, opts.stopping);
  const poolOf = (queue: Queue) => (queue.backend as unknown as PostgresQueueBackend).connection.pool;
  return publisherOn(session, {
    addBulk: (name, jobs) =>
      session.withQueue(name, async (queue) => {
        for (const batch of batchesOf(jobs, BULK_JOBS)) await queue.addBulk(bulkJobsOf(batch));
      }),
    present: (name, jobIds) =>
      session.withQueue(name, async (queue) => {
        // BullMQ has no call that tells many ids at once: one read of its job table.
        const found = new Set<string>();
        for (const ids of batchesOf(jobIds, BULK_JOBS)) {
          const { rows } = await poolOf(queue).query<{ id: string }>(
            'select id from job where queue = $1 and id = any($2::text[])',
            [name, ids],
          );
          for (const row of rows) found.add(row.id);
        }
        return found;
      }),
    ping: () =>
      session
        .withQueue(opts.queues.schema, async (queue) => {
          await poolOf(queue).query('select 1');
          return true;
        })
        .catch(() => false),
    pings: 'queues',
  });
}

/** Where a Postgres session differs: the schema check first, and the queues' own errors. */
function pgBackend(opts: PgPublisherOptions, timeoutMs: number): SessionBackend<void> {
  const connection = pgQueueConnection(opts.queues, {
    max: POOL_MAX,
    connectTimeoutMs: timeoutMs,
    applicationName: 'feedsync-publisher',
  });
  /** The schema's version was found compatible: checked once, before the first call that succeeds. */
  let schemaChecked = false;
  const expired = (): Error =>
    new FeedsyncError(
      `the queues' Postgres (QUEUE_DATABASE_URL): a call did not finish within ${timeoutMs * 2} ms`,
      { code: 'QUEUE_TIMEOUT' },
    );
  return {
    open: () => ({ queues: new Map() }),
    ready: async () => {
      // Before BullMQ's SQL runs: a schema never migrated fails with what to do, not "function does not exist".
      if (schemaChecked) return;
      await withDeadline(
        assertQueueSchema(opts.queues, timeoutMs),
        timeoutMs * 2,
        'the schema check',
        expired,
      );
      schemaChecked = true;
    },
    newQueue: (name) => {
      const { Queue: BullQueue, createPostgresBackend } = require('bullmq') as typeof import('bullmq');
      return new BullQueue(
        name,
        { connection, defaultJobOptions: structuredClone(opts.jobOptions) },
        createPostgresBackend,
      ) as unknown as Queue;
    },
    stopped: () =>
      new FeedsyncError("the queues' Postgres: stopping, and the last call failed: not connecting again", {
        code: 'QUEUE_STOPPING',
      }),
    toError: toQueueError,
    callName: 'a queue call',
    expired,
  };
}
