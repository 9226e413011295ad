import { commandName, frames, shorten } from '../error-summary.js';
import { FeedsyncError, RedisError } from '../errors.js';

/**
 * What the publisher throws in place of an error of ioredis or BullMQ: a RedisError
 * with the message, the Redis error code (`MOVED`, `READONLY`…) or socket code
 * (`ECONNREFUSED`…) and the command's name, and nothing else: no arguments, no
 * earlier errors, no cause that holds them. feedsync's own errors pass unchanged.
 */
export function toRedisError(err: unknown): Error {
  if (err instanceof FeedsyncError) return err;
  const source = err instanceof Error ? err : new Error(String(err));
  const message = shorten(source.message);
  const own = (source as { code?: unknown }).code;
  const redisCode = typeof own === 'string' ? own : /^([A-Z][A-Z_]+)\b/.exec(message)?.[1];
  const command = commandName(source);
  const clean = new RedisError(`Redis: ${message}${command ? ` (command ${command})` : ''}`, {
    code: 'REDIS_ERROR',
    command,
    ...(redisCode === undefined ? {} : { redisCode }),
  });
  // Where ioredis saw the failure; the first line repeats only the shortened message.
  if (source.stack) clean.stack = `${clean.name}: ${clean.message}\n${frames(source.stack)}`;
  return clean;
}
