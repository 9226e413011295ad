import { randomBytes } from 'node:crypto';
import { parseRedisSettings, type RedisSettings } from '../../src/config/redis-settings.js';
import { clearPrefix } from '../../src/queue/clear-prefix.js';
import { jobOptionsFor } from '../../src/queue/routes.js';

/** The Redis the tests use: `TEST_REDIS_URL`, or the machine's own at 6379 (compose publishes 6380). */
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** The job options of the defaults: JOB_ATTEMPTS 5, JOB_BACKOFF_MS 1000. */
export const TEST_JOB_OPTIONS = jobOptionsFor({ jobAttempts: 5, jobBackoffMs: 1_000 });

/** The Redis settings of one URL (REDIS_URL alone), as the config would parse them. */
export function redisSettings(url: string): RedisSettings {
  return parseRedisSettings({ REDIS_URL: url });
}

export const TEST_REDIS = redisSettings(TEST_REDIS_URL);

/** A BullMQ key prefix of one test file's own. */
export function uniquePrefix(label: string): string {
  return `test-${label}-${randomBytes(4).toString('hex')}`;
}

/** Deletes every key under the prefix, for afterAll. */
export function deletePrefix(prefix: string, url = TEST_REDIS_URL): Promise<void> {
  return clearPrefix(redisSettings(url), prefix);
}
