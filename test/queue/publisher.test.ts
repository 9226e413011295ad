import { afterAll, describe, expect, it } from 'vitest';
import { createRedisPublisher } from '../../src/queue/redis-publisher.js';
import { deletePrefix, redisSettings, TEST_JOB_OPTIONS, TEST_REDIS, uniquePrefix } from '../support/redis.js';

const prefix = uniquePrefix('publisher');
afterAll(() => deletePrefix(prefix));

describe('publisher', () => {
  it('serves calls made while its first connection is still connecting', async () => {
    const publisher = createRedisPublisher({ redis: TEST_REDIS, prefix, jobOptions: TEST_JOB_OPTIONS });
    try {
      const jobs = [{ name: 'email.sent', jobId: 's/1', data: { id: '1' } }];
      const [added, pinged, counts] = await Promise.all([
        publisher.addBulk('q', jobs),
        publisher.ping(),
        publisher.counts('other'),
      ]);
      expect(added).toBeUndefined();
      expect(pinged).toBe(true);
      expect(counts).toMatchObject({ waiting: 0 });
      expect(await publisher.counts('q')).toMatchObject({ waiting: 1 });
    } finally {
      await publisher.close();
    }
  });

  it('fails fast while Redis is down, and ping says false', async () => {
    const publisher = createRedisPublisher({
      redis: redisSettings('redis://127.0.0.1:1'),
      prefix,
      jobOptions: TEST_JOB_OPTIONS,
      timeoutMs: 500,
    });
    try {
      expect(await publisher.ping()).toBe(false);
      await expect(publisher.addBulk('q', [{ name: 'x', jobId: 'a/b', data: {} }])).rejects.toThrow();
    } finally {
      await publisher.close();
    }
  });
});
