import { randomBytes } from 'node:crypto';
import { createPostgresBackend, type Job, Queue, Worker } from 'bullmq';
import pg from 'pg';
import { createPgPublisher } from '../../src/queue/pg-publisher.js';
import { migrateQueues, pgQueueConnection } from '../../src/queue/pg-queues.js';
import type { Publisher } from '../../src/queue/publisher.js';
import { createRedisPublisher } from '../../src/queue/redis-publisher.js';
import { dropSchema, TEST_DATABASE_URL } from './postgres.js';
import { deletePrefix, TEST_JOB_OPTIONS, TEST_REDIS, TEST_REDIS_URL } from './redis.js';

/**
 * Where a test run keeps its queues: FEEDSYNC_TEST_QUEUE_BACKEND=postgres puts them in
 * BullMQ's Postgres backend (vitest.config.ts runs the parameterised files so, a second
 * time); anything else, in Redis.
 */
export const TEST_QUEUE_BACKEND: 'redis' | 'postgres' =
  process.env.FEEDSYNC_TEST_QUEUE_BACKEND === 'postgres' ? 'postgres' : 'redis';

/** The variables that put a config's queues where this run keeps them. */
export const TEST_QUEUE_ENV: Record<string, string> =
  TEST_QUEUE_BACKEND === 'postgres'
    ? { QUEUE_BACKEND: 'postgres', QUEUE_DATABASE_URL: TEST_DATABASE_URL }
    : {};

/**
 * A queue prefix of one test file's own, ready: in Redis a key prefix; in Postgres a
 * schema, migrated. Drop it in afterAll with dropQueues.
 */
export async function queuePrefix(label: string): Promise<string> {
  const prefix = queuePrefixName(label);
  await migrateTestQueues(prefix);
  return prefix;
}

/**
 * A fresh queue prefix's name, for a file that builds its config at load time: in Redis
 * a key prefix, in Postgres a schema name that migrateTestQueues makes ready.
 */
export function queuePrefixName(label: string): string {
  const hex = randomBytes(4).toString('hex');
  if (TEST_QUEUE_BACKEND === 'redis') return `test-${label}-${hex}`;
  return `tq_${label.replace(/[^a-z0-9]/g, '_')}_${hex}`;
}

/** Creates the queues' schema that a Postgres prefix names, as `feedsync migrate` does; nothing in Redis. */
export async function migrateTestQueues(prefix: string): Promise<void> {
  if (TEST_QUEUE_BACKEND === 'postgres')
    await migrateQueues({ url: TEST_DATABASE_URL, schema: prefix }, 10_000);
}

/** Deletes the queues under the prefix: its keys, or its schema. */
export function dropQueues(prefix: string): Promise<void> {
  return TEST_QUEUE_BACKEND === 'redis' ? deletePrefix(prefix) : dropSchema(prefix);
}

/**
 * Empties the queues as a Redis that lost its data would be: every key under the
 * prefix deleted, or every table of the schema but BullMQ's migration ledger emptied.
 */
export async function emptyQueues(prefix: string): Promise<void> {
  if (TEST_QUEUE_BACKEND === 'redis') return deletePrefix(prefix);
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  try {
    const { rows } = await client.query<{ name: string }>(
      `SELECT format('%I.%I', schemaname, tablename) AS name FROM pg_tables
        WHERE schemaname = $1 AND tablename <> 'migration'`,
      [prefix],
    );
    await client.query(`TRUNCATE ${rows.map((r) => r.name).join(', ')}`);
  } finally {
    await client.end();
  }
}

/** The ids of the jobs waiting in a queue (no worker runs in these tests, so every added job waits). */
export async function waitingIds(name: string, prefix: string): Promise<string[]> {
  const queue = testQueue(name, prefix);
  try {
    return await waitingJobIds(queue);
  } finally {
    await queue.close();
  }
}

/**
 * The ids of a queue's waiting jobs, a page at a time: BullMQ's Postgres backend reads each
 * job on the queue's pool (2 connections here), and thousands asked at once wait past its
 * connect timeout on a busy machine.
 */
export async function waitingJobIds(queue: Queue): Promise<string[]> {
  const ids: string[] = [];
  for (let start = 0; ; start += 200) {
    const page = await queue.getWaiting(start, start + 199);
    ids.push(...page.map((job) => job.id!));
    if (page.length < 200) return ids;
  }
}

/** A BullMQ Queue on this run's backend, for a test to look into; close it after. */
export function testQueue(name: string, prefix: string): Queue {
  if (TEST_QUEUE_BACKEND === 'redis') return new Queue(name, { connection: { url: TEST_REDIS_URL }, prefix });
  const connection = pgQueueConnection(
    { url: TEST_DATABASE_URL, schema: prefix },
    { max: 2, connectTimeoutMs: 10_000, applicationName: 'feedsync-test' },
  );
  return new Queue(name, { connection }, createPostgresBackend) as unknown as Queue;
}

/** A BullMQ Worker on this run's backend that runs `processor` for every job; close it after. */
export function testWorker(name: string, prefix: string, processor: (job: Job) => Promise<unknown>): Worker {
  if (TEST_QUEUE_BACKEND === 'redis') {
    return new Worker(name, processor, {
      connection: { url: TEST_REDIS_URL, maxRetriesPerRequest: null },
      prefix,
    });
  }
  const connection = pgQueueConnection(
    { url: TEST_DATABASE_URL, schema: prefix },
    { max: 4, connectTimeoutMs: 10_000, applicationName: 'feedsync-test' },
  );
  return new Worker(name, processor, { connection }, createPostgresBackend) as unknown as Worker;
}

/** feedsync's publisher on this run's backend, with the default job options. */
export function testPublisher(prefix: string, opts: { timeoutMs?: number } = {}): Publisher {
  return TEST_QUEUE_BACKEND === 'redis'
    ? createRedisPublisher({ redis: TEST_REDIS, prefix, jobOptions: TEST_JOB_OPTIONS, ...opts })
    : createPgPublisher({
        queues: { url: TEST_DATABASE_URL, schema: prefix },
        jobOptions: TEST_JOB_OPTIONS,
        ...opts,
      });
}
