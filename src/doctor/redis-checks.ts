import { publisherFor } from '../compose/parts.js';
import { queueStoreFor } from '../compose/queue-store.js';
import type { Config } from '../config/config-type.js';
import type { RedisSettings } from '../config/redis-settings.js';
import { ConfigError } from '../errors.js';
import { redactUrl } from '../logger.js';
import { connectRedis, type RedisConnection } from '../redis/connect.js';
import { toRedisError } from '../redis/errors.js';
import { planWait } from '../redis/replicas.js';
import { type Check, check } from './report.js';

/**
 * Redis answers (and in which mode), every master evicts nothing (BullMQ needs
 * noeviction), how many replicas a batch of jobs waits for, and the queues' counts.
 */
export async function redisChecks(config: Config, timeoutMs: number): Promise<Check[]> {
  const where = describeTarget(config.redis);
  let connection: RedisConnection;
  try {
    connection = await connectRedis(config.redis, { timeoutMs, prefix: config.queues.prefix });
  } catch (err) {
    const skipped = (why: string) => [
      check('redis-maxmemory-policy', 'skip', `not checked: ${why}`),
      check('redis-wait-replicas', 'skip', `not checked: ${why}`),
      check('queues', 'skip', `not checked: ${why}`),
    ];
    if (err instanceof ConfigError) {
      return [
        check('redis', 'fail', err.message, 'correct the variable named above'),
        ...skipped('see redis'),
      ];
    }
    return [
      check(
        'redis',
        'fail',
        `cannot reach Redis at ${where} (${toRedisError(err).message})`,
        'check REDIS_URL (host, port, password, rediss:// for TLS), REDIS_SENTINELS / REDIS_SENTINEL_NAME, and that the server runs',
      ),
      ...skipped('Redis is unreachable'),
    ];
  }
  const checks: Check[] = [];
  try {
    const masters = connection.masters();
    const shape =
      connection.mode === 'cluster'
        ? `a cluster of ${masters.length} masters`
        : connection.mode === 'sentinel'
          ? `the master "${config.redis.sentinel?.name}" through Sentinel`
          : 'one server';
    checks.push(
      check(
        'redis',
        'ok',
        `${connection.mode}: ${shape}, reachable at ${where}${config.redis.tls ? ' over TLS' : ''}`,
      ),
    );
    checks.push(await policyCheck(connection));
    checks.push(await waitCheck(connection, config));
  } finally {
    connection.disconnect();
  }
  checks.push(await queuesCheck(config, timeoutMs));
  return checks;
}

/** Where feedsync looks for Redis, without passwords. */
function describeTarget(settings: RedisSettings): string {
  if (!settings.sentinel) return redactUrl(settings.url);
  const sentinels = settings.sentinel.nodes.map((n) => `${n.host}:${n.port}`).join(',');
  return `Sentinels ${sentinels}`;
}

/** The job counts of both queues, read through the publisher of QUEUE_BACKEND; `see` names the check that says why not. */
export async function queuesCheck(config: Config, timeoutMs: number, see = 'redis'): Promise<Check> {
  const publisher = publisherFor(config, { redisTimeoutMs: timeoutMs });
  try {
    const parts: string[] = [];
    for (const queue of [config.queues.emailEvents, config.queues.contactEvents]) {
      const counts = await publisher.counts(queue);
      parts.push(
        `${queue}: ${Object.entries(counts)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ')}`,
      );
    }
    return check('queues', 'ok', `${queueStoreFor(config).place}; ${parts.join('; ')}`);
  } catch (err) {
    return check(
      'queues',
      'fail',
      `cannot read the queues (${(err as Error).message})`,
      `see the ${see} check`,
    );
  } finally {
    await publisher.close();
  }
}

/** maxmemory-policy of every master: one that evicts may drop jobs. */
async function policyCheck(connection: RedisConnection): Promise<Check> {
  const fix =
    'run "redis-cli CONFIG SET maxmemory-policy noeviction" and put "maxmemory-policy noeviction" in redis.conf ' +
    "(on a managed Redis, in the provider's parameter settings)";
  const cluster = connection.mode === 'cluster';
  const evicting: string[] = [];
  const unread: string[] = [];
  const masters = connection.masters();
  for (const node of masters) {
    // In a cluster each master is named; elsewhere there is only the one.
    const on = cluster ? ` on ${node.options.host}:${node.options.port}` : '';
    try {
      const policy = ((await node.config('GET', 'maxmemory-policy')) as string[])[1] ?? 'unknown';
      if (policy !== 'noeviction') evicting.push(`${policy}${on}`);
    } catch (err) {
      unread.push(`${toRedisError(err).message}${on}`);
    }
  }
  if (evicting.length > 0) {
    return check(
      'redis-maxmemory-policy',
      'warn',
      `maxmemory-policy is ${evicting.join(', ')}: when Redis fills up it may evict jobs, which BullMQ needs kept (noeviction)`,
      fix,
    );
  }
  if (unread.length > 0) {
    return check(
      'redis-maxmemory-policy',
      'warn',
      `cannot read maxmemory-policy (${unread.join('; ')}); BullMQ needs noeviction`,
      `make sure it is noeviction: ${fix}`,
    );
  }
  return check(
    'redis-maxmemory-policy',
    'ok',
    cluster ? `noeviction on all ${masters.length} masters` : 'noeviction',
  );
}

/** REDIS_WAIT_REPLICAS as this set-up resolves it, why, and what it costs or risks. */
async function waitCheck(connection: RedisConnection, config: Config): Promise<Check> {
  const name = 'redis-wait-replicas';
  let plan: Awaited<ReturnType<typeof planWait>>;
  try {
    plan = await planWait(connection, config.redis.waitReplicas, config.queues.prefix);
  } catch (err) {
    return check(
      name,
      'warn',
      `cannot tell the queues' master and its replicas (${toRedisError(err).message})`,
    );
  }
  const { replicas: n, connectedReplicas: have } = plan;
  const requeue =
    'after a failover that was not waited on, run "feedsync requeue --since <a time before the failover>" (docs/RUNBOOK.md)';
  if (n === 0) {
    const failsOver = connection.mode === 'sentinel' || (have !== null && have > 0);
    return failsOver
      ? check(
          name,
          'warn',
          `0 (${plan.why}): jobs are not waited on, so a failover may lose those published in its last moments`,
          `unset REDIS_WAIT_REPLICAS to wait for 1 replica; ${requeue}`,
        )
      : check(name, 'ok', `0 (${plan.why}): no WAIT`);
  }
  const waits = `a batch of jobs counts as published once ${n === 1 ? '1 replica holds' : `${n} replicas hold`} it, so a failover loses none`;
  const cost =
    'it costs a WAIT round trip per batch, and while fewer replicas answer, publishing pauses and a once run exits 1, the jobs left in the outbox for the next';
  if (have !== null && have < n) {
    return check(
      name,
      'warn',
      `${n} (${plan.why}): ${waits}, but only ${have} ${have === 1 ? 'is' : 'are'} connected now, so publishing fails until ${n} answer`,
      plan.configured
        ? `restore the replicas, or lower REDIS_WAIT_REPLICAS (0 risks losing jobs in a failover; ${requeue})`
        : 'restore the replica (check the master\'s "INFO replication"); set REDIS_WAIT_REPLICAS=0 only to publish at the risk of a loss in a failover',
    );
  }
  return check(name, 'ok', `${n} (${plan.why}): ${waits}; ${cost}`);
}
