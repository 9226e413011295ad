import { createRedis } from './publisher.js';

/** Deletes every BullMQ key under `prefix` (`<prefix>:<queue>:…`), a SCAN page at a time. */
export async function clearPrefix(redisUrl: string, prefix: string): Promise<void> {
  const redis = createRedis(redisUrl);
  await redis.connect();
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await redis.unlink(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}
