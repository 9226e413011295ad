import { createPostgresBackend, Queue } from 'bullmq';
import pg from 'pg';
import { createPgPublisher } from '../../../src/queue/pg-publisher.js';
import { pgQueueConnection } from '../../../src/queue/pg-queues.js';
import type { Publisher } from '../../../src/queue/publisher.js';
import { createRedisPublisher } from '../../../src/queue/redis-publisher.js';
import { TEST_QUEUE_BACKEND } from '../../support/queues.js';
import { deletePrefix, redisSettings, TEST_JOB_OPTIONS } from '../../support/redis.js';
import type { Sandbox } from './sandbox.js';

/** What names a sandbox's queues: a Redis and a key prefix, or a Postgres and a schema. */
export type QueueHome = Pick<Sandbox, 'prefix' | 'redisUrl' | 'queueUrl'>;

/** Where this run keeps the sandboxes' queues (FEEDSYNC_TEST_QUEUE_BACKEND), for an item's text. */
export const QUEUES_IN = TEST_QUEUE_BACKEND === 'postgres' ? "BullMQ's Postgres backend" : 'Redis';

/** A BullMQ Queue on the sandbox's backend, for a test to look into; close it after. */
export function queueOf(box: QueueHome, name: string): Queue {
  if (!box.queueUrl) return new Queue(name, { connection: { url: box.redisUrl }, prefix: box.prefix });
  const connection = pgQueueConnection(
    { url: box.queueUrl, schema: box.prefix },
    { max: 2, connectTimeoutMs: 10_000, applicationName: 'feedsync-faults-queues' },
  );
  return new Queue(name, { connection }, createPostgresBackend) as unknown as Queue;
}

/** feedsync's publisher on the sandbox's backend, with the default job options. */
export function publisherOf(box: QueueHome): Publisher {
  return box.queueUrl
    ? createPgPublisher({ queues: { url: box.queueUrl, schema: box.prefix }, jobOptions: TEST_JOB_OPTIONS })
    : createRedisPublisher({
        redis: redisSettings(box.redisUrl),
        prefix: box.prefix,
        jobOptions: TEST_JOB_OPTIONS,
      });
}

/**
 * Makes the queues lose every job, as a Redis that lost its data: every key under the
 * prefix deleted, or every table of the schema but BullMQ's migration ledger emptied.
 */
export async function loseJobs(box: QueueHome): Promise<void> {
  if (!box.queueUrl) return deletePrefix(box.prefix, box.redisUrl);
  const client = new pg.Client({ connectionString: box.queueUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ name: string }>(
      `SELECT format('%I.%I', schemaname, tablename) AS name FROM pg_tables
        WHERE schemaname = $1 AND tablename <> 'migration'`,
      [box.prefix],
    );
    await client.query(`TRUNCATE ${rows.map((r) => r.name).join(', ')}`);
  } finally {
    await client.end();
  }
}
