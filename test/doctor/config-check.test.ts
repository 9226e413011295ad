import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { checkConfig } from '../../src/doctor/config-check.js';

describe("doctor's config check", () => {
  it('says the Redis settings are unused with the queues in Postgres', () => {
    const env = { QUEUE_BACKEND: 'postgres', REDIS_URL: 'redis://cache.internal:6380' };
    const { check } = checkConfig(() => loadConfig(env), env);
    expect(check.message).toContain('QUEUE_BACKEND=postgres');
    expect(check.message).toContain(
      'REDIS_URL=redis://cache.internal:6380 (unused: QUEUE_BACKEND=postgres opens no Redis connection)',
    );
    const redis = checkConfig(() => loadConfig({ REDIS_URL: 'redis://cache.internal:6380' }));
    expect(redis.check.message).not.toContain('unused');
  });
});
