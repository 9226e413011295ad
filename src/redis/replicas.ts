import { RedisError } from '../errors.js';
import type { RedisConnection } from './connect.js';

/**
 * Waits until `replicas` replicas of every master hold what this connection wrote
 * (Redis WAIT, asked of each master on the connection that wrote to it; a master
 * written nothing answers at once). Throws when fewer answer within `timeoutMs`:
 * the caller then counts the batch as not published and adds it again later, which
 * the job ids make harmless. Replication is asynchronous: without this a failover
 * can lose the last jobs a master acknowledged.
 */
export async function waitForReplicas(
  connection: RedisConnection,
  replicas: number,
  timeoutMs: number,
): Promise<void> {
  const acked = await Promise.all(connection.masters().map((node) => node.wait(replicas, timeoutMs)));
  const fewest = Math.min(...acked);
  if (fewest < replicas) {
    throw new RedisError(
      `Redis: ${fewest} of the ${replicas} replicas (REDIS_WAIT_REPLICAS) acknowledged the jobs within ${timeoutMs} ms`,
      { code: 'REDIS_NOT_REPLICATED', command: 'wait' },
    );
  }
}
