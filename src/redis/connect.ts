import { createRequire } from 'node:module';
import type { Cluster, Redis, RedisOptions } from 'ioredis';
import {
  hashTagOf,
  missingHashTagError,
  type RedisNode,
  type RedisSettings,
} from '../config/redis-settings.js';
import { withDeadline } from '../deadline.js';
import { ConfigError, RedisError } from '../errors.js';

// ioredis is loaded on first use: a run with nothing to publish starts without it.
const require = createRequire(import.meta.url);

export type RedisMode = 'standalone' | 'cluster' | 'sentinel';

/** One connection to Redis in whichever form the settings name, ready for commands. */
export interface RedisConnection {
  readonly mode: RedisMode;
  /** What BullMQ and single commands use: a Redis, or a Cluster that routes by slot. */
  readonly client: Redis | Cluster;
  /** Every master (the one server outside a cluster), for per-node commands such as CONFIG GET or SCAN. */
  masters(): Redis[];
  disconnect(): void;
}

export interface ConnectOptions {
  /** Max wait for connecting or for one command. */
  timeoutMs: number;
  /** The BullMQ prefix: in cluster mode it must hold a hash tag (ConfigError otherwise). */
  prefix?: string;
}

/** `host:port` of a node, for messages. */
export function nodeName(node: RedisNode): string {
  return node.host.includes(':') ? `[${node.host}]:${node.port}` : `${node.host}:${node.port}`;
}

/**
 * Connects as the settings say: through the Sentinels to their master; to a cluster
 * when REDIS_CLUSTER=true or when the first reachable seed says `cluster_enabled:1`;
 * else to the one server. Every form fails fast (no offline queue, no reconnect loop
 * of ioredis's own): the caller drops a failed connection and connects afresh. The
 * whole of it is bounded by `timeoutMs`: a cluster between a master's death and its
 * replica's promotion, Sentinels that name no master yet, or a server that never
 * answers end it with an error (REDIS_TIMEOUT at the latest) and leave no client behind.
 */
export async function connectRedis(settings: RedisSettings, opts: ConnectOptions): Promise<RedisConnection> {
  const opened: { disconnect(): void }[] = [];
  const attempt = connectAny(settings, opts, (client) => {
    opened.push(client);
  });
  try {
    return await withDeadline(attempt, opts.timeoutMs, 'connecting');
  } catch (err) {
    for (const client of opened) client.disconnect();
    // A connect that settles after the deadline is dropped as it arrives.
    attempt.then(
      (late) => late.disconnect(),
      () => {},
    );
    throw err;
  }
}

type Track = (client: { disconnect(): void }) => void;

async function connectAny(
  settings: RedisSettings,
  opts: ConnectOptions,
  track: Track,
): Promise<RedisConnection> {
  if (settings.sentinel) {
    const redis = sentinelClient(settings, opts.timeoutMs);
    track(redis);
    await connectOrSayWhy(redis).catch((err: unknown) => {
      throw noMasterNamed(settings.sentinel!.name, err);
    });
    return single('sentinel', redis);
  }
  if (settings.cluster === true) return clusterConnection(settings, opts, track);
  let lastError: unknown;
  for (const node of settings.nodes) {
    const redis = nodeClient(settings, node, opts.timeoutMs);
    track(redis);
    try {
      await connectOrSayWhy(redis);
      if (settings.cluster === false) return single('standalone', redis);
      const info = await redis.info('cluster');
      if (!/^cluster_enabled:1\s*$/m.test(info)) {
        if (settings.nodes.length > 1) {
          throw new ConfigError(
            `REDIS_URL: lists ${settings.nodes.length} nodes, but ${nodeName(node)} is not a cluster node; give one URL, or the nodes of a cluster`,
          );
        }
        return single('standalone', redis);
      }
      redis.disconnect();
      return clusterConnection(settings, opts, track);
    } catch (err) {
      redis.disconnect();
      if (err instanceof ConfigError) throw err;
      lastError = err;
    }
  }
  throw lastError;
}

function single(mode: RedisMode, redis: Redis): RedisConnection {
  return { mode, client: redis, masters: () => [redis], disconnect: () => redis.disconnect() };
}

async function clusterConnection(
  settings: RedisSettings,
  opts: ConnectOptions,
  track: Track,
): Promise<RedisConnection> {
  if (opts.prefix !== undefined && hashTagOf(opts.prefix) === null) throw missingHashTagError(opts.prefix);
  if (settings.db !== 0) {
    throw new ConfigError('REDIS_URL: a Redis Cluster has only database 0; remove the /<db> from the URL');
  }
  const { Cluster: ClusterClient } = require('ioredis') as typeof import('ioredis');
  const {
    retryStrategy: _none,
    enableOfflineQueue: _off,
    ...redisOptions
  } = nodeOptions(settings, opts.timeoutMs);
  const cluster = new ClusterClient(
    settings.nodes.map((n) => ({ host: n.host, port: n.port })),
    {
      enableOfflineQueue: false,
      lazyConnect: true,
      clusterRetryStrategy: () => null,
      slotsRefreshTimeout: opts.timeoutMs,
      redisOptions,
      // With TLS the certificate names the host: connect by the name, as given, not by its address.
      ...(settings.tls
        ? { dnsLookup: (address: string, done: (e: null, a: string) => void) => done(null, address) }
        : {}),
    },
  );
  cluster.on('error', () => {});
  cluster.on('node error', () => {});
  track(cluster);
  try {
    await Promise.race([cluster.connect(), readyCheckFailed(cluster)]);
  } catch (err) {
    cluster.disconnect();
    throw err;
  }
  return {
    mode: 'cluster',
    client: cluster,
    masters: () => cluster.nodes('master'),
    disconnect: () => cluster.disconnect(),
  };
}

/**
 * Rejects when a Cluster ends while connecting. Once it has the slots, ioredis checks
 * `CLUSTER INFO`; on `cluster_state:fail` (a master dead and no replica promoted yet)
 * it drops the connection and, with no retry strategy, ends without settling
 * connect(). Told here at once, the relay's next attempt comes sooner than the deadline.
 */
function readyCheckFailed(cluster: Cluster): Promise<never> {
  let reachedNodes = false;
  cluster.once('connect', () => {
    reachedNodes = true;
  });
  const failed = new Promise<never>((_, reject) => {
    cluster.once('end', () =>
      reject(
        reachedNodes
          ? new RedisError(
              'Redis: the cluster is down (CLUSTER INFO does not say cluster_state:ok: a master is unreachable and no replica has taken over yet)',
              { code: 'CLUSTERDOWN', command: 'cluster' },
            )
          : new RedisError('Redis: none of the cluster nodes answered', {
              code: 'CLUSTERDOWN',
              command: null,
            }),
      ),
    );
  });
  failed.catch(() => {});
  return failed;
}

/** The options every connection shares: fail fast, TLS, credentials. */
function nodeOptions(settings: RedisSettings, timeoutMs: number): RedisOptions {
  return {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: timeoutMs,
    connectTimeout: timeoutMs,
    lazyConnect: true,
    // No reconnect loop of ioredis's own: after a failure the caller starts afresh on its next call.
    retryStrategy: () => null,
    db: settings.db,
    ...(settings.username !== null ? { username: settings.username } : {}),
    ...(settings.password !== null ? { password: settings.password } : {}),
    ...(settings.tls ? { tls: {} } : {}),
  };
}

function nodeClient(settings: RedisSettings, node: RedisNode, timeoutMs: number): Redis {
  const { Redis: RedisClient } = require('ioredis') as typeof import('ioredis');
  const redis = new RedisClient({ ...nodeOptions(settings, timeoutMs), host: node.host, port: node.port });
  // Without a listener ioredis prints every failure; the callers report them instead.
  redis.on('error', () => {});
  return redis;
}

/**
 * Connects, and on failure throws why: without a reconnect loop ioredis rejects with
 * "Connection is closed." and says the cause (ECONNREFUSED, a TLS or AUTH error) only
 * in an 'error' event.
 */
async function connectOrSayWhy(redis: Redis): Promise<void> {
  let cause: unknown;
  const onError = (err: unknown): void => {
    cause ??= err;
  };
  redis.on('error', onError);
  try {
    await redis.connect();
  } catch (err) {
    redis.disconnect();
    throw cause ?? err;
  } finally {
    redis.off('error', onError);
  }
}

/**
 * ioredis says "All sentinels are unreachable" also when they answered but named no
 * master (an unknown REDIS_SENTINEL_NAME, or none elected yet): say what was asked.
 */
function noMasterNamed(name: string, err: unknown): unknown {
  const message = err instanceof Error ? err.message : '';
  const m = /^All sentinels are unreachable and retry is disabled\.(?: Last error: (.*))?$/s.exec(message);
  if (!m) return err;
  const last = m[1] ? ` (the last said: ${m[1].replace(/ undefined$/, '')})` : '';
  return new RedisError(
    `Redis: no Sentinel of REDIS_SENTINELS gave the address of the master "${name}" (REDIS_SENTINEL_NAME)${last}`,
    { code: 'REDIS_NO_MASTER', command: null },
  );
}

function sentinelClient(settings: RedisSettings, timeoutMs: number): Redis {
  const sentinel = settings.sentinel!;
  const { Redis: RedisClient } = require('ioredis') as typeof import('ioredis');
  const redis = new RedisClient({
    ...nodeOptions(settings, timeoutMs),
    sentinels: sentinel.nodes.map((n) => ({ host: n.host, port: n.port })),
    name: sentinel.name,
    role: 'master',
    // Asked afresh on every connection: after a failover the next one reaches the new master.
    sentinelRetryStrategy: () => null,
    sentinelCommandTimeout: timeoutMs,
    enableTLSForSentinelMode: settings.tls,
    ...(sentinel.tls ? { sentinelTLS: {} } : {}),
    ...(sentinel.username !== null ? { sentinelUsername: sentinel.username } : {}),
    ...(sentinel.password !== null ? { sentinelPassword: sentinel.password } : {}),
  });
  redis.on('error', () => {});
  return redis;
}
