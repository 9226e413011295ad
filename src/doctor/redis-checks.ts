import type { Config } from '../config.js';
import { redactUrl } from '../logger.js';
import { createPublisher } from '../queue/publisher.js';
import { jobOptionsFor } from '../queue/routes.js';
import { type Check, check } from './report.js';

/** Redis answers, evicts nothing (BullMQ needs noeviction), and the queues' counts. */
export async function redisChecks(config: Config, timeoutMs: number): Promise<Check[]> {
  const where = redactUrl(config.redis.url);
  const publisher = createPublisher({
    redisUrl: config.redis.url,
    prefix: config.queues.prefix,
    jobOptions: jobOptionsFor(config.queues),
    timeoutMs,
  });
  try {
    if (!(await publisher.ping())) {
      return [
        check(
          'redis',
          'fail',
          `cannot reach Redis at ${where}`,
          'check REDIS_URL (host, port, password, rediss:// for TLS) and that the server runs',
        ),
        check('redis-maxmemory-policy', 'skip', 'not checked: Redis is unreachable'),
        check('queues', 'skip', 'not checked: Redis is unreachable'),
      ];
    }
    const checks = [check('redis', 'ok', `reachable at ${where}`)];
    checks.push(await policyCheck(() => publisher.maxmemoryPolicy()));
    const parts: string[] = [];
    for (const queue of [config.queues.emailEvents, config.queues.contactEvents]) {
      const counts = await publisher.counts(queue);
      parts.push(
        `${queue}: ${Object.entries(counts)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ')}`,
      );
    }
    checks.push(check('queues', 'ok', `prefix "${config.queues.prefix}"; ${parts.join('; ')}`));
    return checks;
  } finally {
    await publisher.close();
  }
}

async function policyCheck(read: () => Promise<string | null>): Promise<Check> {
  const fix =
    'run "redis-cli CONFIG SET maxmemory-policy noeviction" and put "maxmemory-policy noeviction" in redis.conf ' +
    "(on a managed Redis, in the provider's parameter settings)";
  let policy: string | null;
  try {
    policy = await read();
  } catch (err) {
    return check(
      'redis-maxmemory-policy',
      'warn',
      `cannot read maxmemory-policy (${(err as Error).message}); BullMQ needs noeviction`,
      `make sure it is noeviction: ${fix}`,
    );
  }
  if (policy === 'noeviction') return check('redis-maxmemory-policy', 'ok', 'noeviction');
  return check(
    'redis-maxmemory-policy',
    'warn',
    `maxmemory-policy is ${policy ?? 'unknown'}: when Redis fills up it may evict jobs, which BullMQ needs kept (noeviction)`,
    fix,
  );
}
