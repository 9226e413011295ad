import type { RedisSettings } from '../config/redis-settings.js';
import { FeedsyncError, RedisError } from '../errors.js';
import { nodeName } from './connect.js';

/**
 * What run() rejects with when Redis could not be reached at start: one line naming
 * the variable to check and the address tried, with a stable code (REDIS_TIMEOUT when
 * the server accepted and never answered, REDIS_ERROR else). feedsync's own errors
 * that already name their variable (a Sentinel without the master, a cluster without
 * a hash tag) pass as they are.
 */
export function redisUnreachable(settings: RedisSettings, err: unknown, timeoutMs: number): Error {
  if (err instanceof FeedsyncError && err.code !== 'REDIS_TIMEOUT') return err;
  const variable = settings.sentinel ? 'REDIS_SENTINELS' : 'REDIS_URL';
  const where = (settings.sentinel?.nodes ?? settings.nodes).map(nodeName).join(', ');
  if (err instanceof FeedsyncError || (err as { code?: unknown })?.code === 'ETIMEDOUT') {
    return new RedisError(`${variable}: Redis at ${where} did not answer within ${timeoutMs} ms`, {
      code: 'REDIS_TIMEOUT',
      command: null,
    });
  }
  const socketCode = (err as { code?: unknown })?.code;
  const why = typeof socketCode === 'string' ? socketCode : err instanceof Error ? err.message : String(err);
  return new RedisError(`${variable}: cannot reach Redis at ${where} (${why})`, {
    code: 'REDIS_ERROR',
    command: null,
    ...(typeof socketCode === 'string' ? { redisCode: socketCode } : {}),
  });
}
