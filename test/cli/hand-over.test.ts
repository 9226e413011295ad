import { Redis } from 'ioredis';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { handOverFailure } from '../../src/cli/hand-over.js';
import { loadConfig } from '../../src/config/config.js';
import { toRedisError } from '../../src/redis/errors.js';
import { TEST_DATABASE_URL } from '../support/postgres.js';
import { freePort } from '../support/processes.js';
import { TEST_REDIS_URL } from '../support/redis.js';

/** What a real client threw, or a failure of the test. */
async function thrown(fn: () => Promise<unknown>): Promise<unknown> {
  try {
    await fn();
  } catch (err) {
    return err;
  }
  throw new Error('expected a failure');
}

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  try {
    await client.connect();
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

describe('the line for stored events whose jobs were not handed over', () => {
  it('blames Postgres for a statement_timeout and for a refused connection at its port, not Redis', async () => {
    const pooler = await freePort();
    const config = loadConfig({
      DATABASE_URL: `postgres://postgres@127.0.0.1:${pooler}/test`,
      REDIS_URL: TEST_REDIS_URL,
    });
    const timeout = await thrown(() =>
      withClient(TEST_DATABASE_URL, async (c) => {
        await c.query('SET statement_timeout = 3');
        await c.query('SELECT pg_sleep(1)');
      }),
    );
    // A pooler restarted: nothing listens at DATABASE_URL's port.
    const refused = await thrown(() => withClient(config.database.url, async () => {}));
    expect(handOverFailure(timeout, config)).toMatch(
      /^the events are stored, but their jobs were not handed over: Postgres failed, not Redis: .*SQLSTATE 57014/,
    );
    expect(handOverFailure(refused, config)).toContain(
      `Postgres failed, not Redis: cannot reach Postgres at 127.0.0.1:${pooler} (ECONNREFUSED)`,
    );
    for (const line of [handOverFailure(timeout, config), handOverFailure(refused, config)])
      expect(line).not.toContain('REDIS_URL');
  });

  it('blames Redis for what Redis threw', async () => {
    const port = await freePort();
    const config = loadConfig({ REDIS_URL: `redis://127.0.0.1:${port}` });
    const redis = new Redis(config.redis.url, {
      enableOfflineQueue: false,
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    // The failures are asked for below; ioredis would report each again as an event.
    redis.on('error', () => {});
    try {
      const down = await thrown(() => redis.connect());
      const offline = await thrown(() => redis.set('k', 'v'));
      for (const err of [down, offline, toRedisError(offline as Error)]) {
        expect(handOverFailure(err, config)).toBe(
          `the events are stored, but Redis (REDIS_URL, 127.0.0.1:${port}) did not take their jobs; ` +
            'check that Redis runs: the next run hands them over',
        );
      }
    } finally {
      redis.disconnect();
    }
  });
});
