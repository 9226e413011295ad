import type { RedisSettings } from '../config/redis-settings.js';
import { connectRedis } from '../redis/connect.js';

/**
 * Deletes every BullMQ key under `prefix` (`<prefix>:<queue>:…`), a SCAN page at a time,
 * on every master (in a cluster each holds its own slots).
 */
export async function clearPrefix(redis: RedisSettings, prefix: string): Promise<void> {
  const connection = await connectRedis(redis, { timeoutMs: 5_000 });
  try {
    for (const node of connection.masters()) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
        cursor = next;
        // One UNLINK per key, pipelined: a cluster node refuses one command over keys of several slots.
        if (keys.length > 0) await node.pipeline(keys.map((k) => ['unlink', k])).exec();
      } while (cursor !== '0');
    }
  } finally {
    connection.disconnect();
  }
}
