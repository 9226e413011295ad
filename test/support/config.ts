import { loadConfig } from '../../src/config/config.js';
import type { Config } from '../../src/config/config-type.js';
import { TEST_DATABASE_URL } from './postgres.js';
import { TEST_QUEUE_ENV } from './queues.js';
import { TEST_REDIS_URL } from './redis.js';
import { TEST_API_KEY } from './simulator.js';

/** The environment of a test run: one file's schema and queue prefix, a simulator's URL. */
export function testEnv(
  opts: { schema: string; prefix: string; baseUrl?: string },
  extra: Record<string, string> = {},
) {
  return {
    DATABASE_URL: TEST_DATABASE_URL,
    DATABASE_SCHEMA: opts.schema,
    REDIS_URL: TEST_REDIS_URL,
    QUEUE_PREFIX: opts.prefix,
    FEED_API_KEY: TEST_API_KEY,
    LOG_LEVEL: 'warn',
    // A free port: tests run in parallel, and serve-webhooks and sync --watch both serve /metrics.
    METRICS_PORT: '0',
    ...(opts.baseUrl ? { FEED_BASE_URL: opts.baseUrl } : {}),
    // FEEDSYNC_TEST_QUEUE_BACKEND=postgres: the queues in Postgres (test/support/queues.ts).
    ...TEST_QUEUE_ENV,
    ...extra,
  };
}

export function testConfig(
  opts: { schema: string; prefix: string; baseUrl?: string },
  extra: Record<string, string> = {},
): Config {
  return loadConfig(testEnv(opts, extra));
}
