import { RedisError } from './errors.js';

/**
 * Settles with `promise`, or rejects with a RedisError (code REDIS_TIMEOUT), or the
 * error `expiredError` makes, once `ms` have passed. ioredis leaves some waits unbounded whatever its timeouts say (a
 * Cluster's connect() while its ready check finds `cluster_state:fail`): this is
 * what keeps a dying master from hanging a run. The promise itself runs on; the
 * caller drops the connection it belongs to.
 */
export function withDeadline<T>(
  promise: Promise<T>,
  ms: number,
  what: string,
  expiredError: () => Error = () =>
    new RedisError(`Redis: ${what} did not finish within ${ms} ms`, { code: 'REDIS_TIMEOUT', command: null }),
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(expiredError()), ms);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}
