import type { Config } from '../config/config-type.js';
import { hostOf } from '../config/connection-url.js';
import { FeedsyncError } from '../errors.js';
import { describeFailure, storeOf } from './failure.js';
import { redisAdvice } from './redis-advice.js';

/**
 * The line for stored events whose jobs were not handed over, naming the part that
 * failed: the relay reads and marks outbox rows in Postgres as well as adding jobs to
 * Redis, so a pooler restarted or a statement_timeout stops it as surely as Redis does.
 */
export function handOverFailure(err: unknown, config: Config): string {
  if (err instanceof FeedsyncError && err.code.startsWith('QUEUE_')) {
    return (
      `the events are stored, but the queues' Postgres (QUEUE_DATABASE_URL, ${hostOf(config.queues.databaseUrl)}) ` +
      `did not take their jobs: ${err.message}: the next run hands them over`
    );
  }
  if (storeOf(err, config) === 'postgres') {
    return (
      `the events are stored, but their jobs were not handed over: Postgres failed, not Redis: ` +
      `${describeFailure(err, config)}; the next run hands them over`
    );
  }
  return (
    `the events are stored, but Redis (REDIS_URL, ${hostOf(config.redis.url)}) did not take their jobs; ` +
    `${redisAdvice(err)}: the next run hands them over`
  );
}
