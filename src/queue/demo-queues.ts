import type { Redis } from 'ioredis';
import pg from 'pg';
import type { RedisSettings } from '../config/redis-settings.js';
import { ConfigError } from '../errors.js';
import { connectRedis } from '../redis/connect.js';
import { DEMO_MARK, dropDemoSchema, markDemoSchema, refuseForeignSchema } from '../store/demo.js';
import { clearPrefix } from './clear-prefix.js';
import { migrateQueues, type PgQueueSettings } from './pg-queues.js';

// The demo's queues, made afresh on each run: the queue store (src/compose/queue-store.ts) calls the one of its kind.

/**
 * With the queues in Postgres: drops the queues' schema the demo made on an earlier run
 * (never another: DEMO_REFUSED), migrates it afresh and marks it. With `onlyCheck`, the
 * refusal alone: nothing is dropped.
 */
export async function resetDemoQueueSchema(
  queues: PgQueueSettings,
  fallback: string,
  onlyCheck = false,
): Promise<void> {
  const pool = new pg.Pool({ connectionString: queues.url, max: 1 });
  pool.on('error', () => {});
  const where = { pool, schema: queues.schema };
  try {
    await refuseForeignSchema(where, 'QUEUE_PREFIX', fallback);
    if (onlyCheck) return;
    await dropDemoSchema(where);
    await migrateQueues(queues, 5_000);
    await markDemoSchema(where);
  } finally {
    await pool.end();
  }
}

/**
 * Deletes the keys under the demo's queue prefix, unless some are there that the
 * demo did not make (no mark key): then it stops (exit 2) and deletes nothing.
 * Leaves the mark for the next run. With `onlyCheck`, the refusal alone: nothing is deleted.
 */
export async function clearDemoPrefix(
  settings: RedisSettings,
  prefix: string,
  onlyCheck = false,
): Promise<void> {
  const connection = await connectRedis(settings, { timeoutMs: 5_000, prefix });
  const mark = `${prefix}:feedsync-demo-mark`;
  try {
    const masters = connection.masters();
    const marked = (await connection.client.exists(mark)) === 1;
    for (const node of marked ? [] : masters) {
      if (await anyKey(node, `${prefix}:*`)) {
        throw new ConfigError(
          `demo: Redis holds keys under the prefix "${prefix}" that the demo did not make, and the demo ` +
            'deletes only its own; set QUEUE_PREFIX to another name (or leave it unset for feedsync-demo)',
          'DEMO_REFUSED',
        );
      }
    }
    if (onlyCheck) return;
    await clearPrefix(settings, prefix);
    await connection.client.set(mark, DEMO_MARK);
  } finally {
    connection.disconnect();
  }
}

/** Whether any key matches: SCAN may answer empty pages before the end. */
async function anyKey(redis: Redis, pattern: string): Promise<boolean> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    if (keys.length > 0) return true;
    cursor = next;
  } while (cursor !== '0');
  return false;
}
