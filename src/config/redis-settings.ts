import { ConfigError } from '../errors.js';

/** One Redis server: a seed node of a cluster, the standalone server, or a Sentinel. */
export interface RedisNode {
  readonly host: string;
  readonly port: number;
}

/** How to reach Redis, parsed from REDIS_URL, REDIS_CLUSTER, REDIS_SENTINELS and REDIS_SENTINEL_NAME. */
export interface RedisSettings {
  /** REDIS_URL as given: one URL, or several seed nodes comma-separated. */
  readonly url: string;
  /** The server, or the seed nodes of a cluster (any of them is enough to find the rest). */
  readonly nodes: readonly RedisNode[];
  /** `rediss://`: TLS to every node (and to the Sentinels, unless they are given as `redis://`). */
  readonly tls: boolean;
  readonly username: string | null;
  readonly password: string | null;
  /** The database number (the URL's path); a cluster has only 0. */
  readonly db: number;
  /** REDIS_CLUSTER: true forces cluster mode, false forbids it, null asks the server (`INFO cluster`). */
  readonly cluster: boolean | null;
  /** REDIS_SENTINELS and REDIS_SENTINEL_NAME: the master is found through them. Null without. */
  readonly sentinel: SentinelSettings | null;
  /**
   * REDIS_WAIT_REPLICAS: replicas that must hold a batch of jobs (Redis WAIT) before its
   * outbox rows count as published, so a failover to one of them loses none. Null when
   * unset: resolved per connection (1 under Sentinel and where the queues' master has a
   * replica, else 0; see planWait in replicas.ts).
   */
  readonly waitReplicas: number | null;
}

export interface SentinelSettings {
  readonly nodes: readonly RedisNode[];
  /** REDIS_SENTINEL_NAME: the master's name in the Sentinels' configuration. */
  readonly name: string;
  readonly tls: boolean;
  /** The Sentinels' own credentials, from `redis://user:pass@host:port` entries. */
  readonly username: string | null;
  readonly password: string | null;
}

export interface RedisEnv {
  REDIS_URL: string;
  REDIS_CLUSTER?: boolean | undefined;
  REDIS_SENTINELS?: string | undefined;
  REDIS_SENTINEL_NAME?: string | undefined;
  REDIS_WAIT_REPLICAS?: number | undefined;
}

interface Entry {
  node: RedisNode;
  /** Null for a bare `host:port`, which takes the scheme of the entries around it. */
  tls: boolean | null;
  username: string | null;
  password: string | null;
  db: number | null;
}

/**
 * Parses the Redis variables, or throws a ConfigError naming the variable (never its
 * value: it may hold a password).
 */
export function parseRedisSettings(env: RedisEnv): RedisSettings {
  const entries = parseList('REDIS_URL', env.REDIS_URL, 6379);
  const first = entries[0]!;
  const tls = first.tls ?? false;
  const username = agreed(
    'REDIS_URL',
    'user name',
    entries.map((e) => e.username),
  );
  const password = agreed(
    'REDIS_URL',
    'password',
    entries.map((e) => e.password),
  );
  const db =
    agreed(
      'REDIS_URL',
      'database number',
      entries.map((e) => e.db),
    ) ?? 0;
  if (entries.some((e) => e.tls !== null && e.tls !== tls)) {
    throw new ConfigError(
      'REDIS_URL: mixes redis:// and rediss://; use rediss:// for every node of a TLS setup',
    );
  }
  const cluster = env.REDIS_CLUSTER ?? null;
  if (cluster === false && entries.length > 1) {
    throw new ConfigError(
      'REDIS_URL: several nodes are listed, which only a cluster takes; unset REDIS_CLUSTER=false',
    );
  }
  if (cluster === true && db !== 0) {
    throw new ConfigError('REDIS_URL: a Redis Cluster has only database 0; remove the /<db> from the URL');
  }
  return {
    url: env.REDIS_URL,
    nodes: entries.map((e) => e.node),
    tls,
    username,
    password,
    db,
    cluster,
    sentinel: parseSentinel(env, tls, entries.length, cluster),
    waitReplicas: env.REDIS_WAIT_REPLICAS ?? null,
  };
}

function parseSentinel(
  env: RedisEnv,
  tls: boolean,
  seedCount: number,
  cluster: boolean | null,
): SentinelSettings | null {
  const name = env.REDIS_SENTINEL_NAME;
  if (env.REDIS_SENTINELS === undefined) {
    if (name !== undefined)
      throw new ConfigError('REDIS_SENTINEL_NAME: set REDIS_SENTINELS too (host:port,…)');
    return null;
  }
  if (name === undefined) {
    throw new ConfigError(
      "REDIS_SENTINEL_NAME: required with REDIS_SENTINELS (the master's name, e.g. mymaster)",
    );
  }
  if (cluster === true)
    throw new ConfigError('REDIS_CLUSTER: a Sentinel setup is not a cluster; unset one of the two');
  if (seedCount > 1) {
    throw new ConfigError(
      'REDIS_URL: with REDIS_SENTINELS give one URL (its credentials, database and scheme are the master’s)',
    );
  }
  const entries = parseList('REDIS_SENTINELS', env.REDIS_SENTINELS, 26379);
  const sentinelTls = entries[0]!.tls ?? tls;
  if (entries.some((e) => e.tls !== null && e.tls !== sentinelTls)) {
    throw new ConfigError('REDIS_SENTINELS: mixes redis:// and rediss://');
  }
  return {
    nodes: entries.map((e) => e.node),
    name,
    tls: sentinelTls,
    username: agreed(
      'REDIS_SENTINELS',
      'user name',
      entries.map((e) => e.username),
    ),
    password: agreed(
      'REDIS_SENTINELS',
      'password',
      entries.map((e) => e.password),
    ),
  };
}

/** Comma-separated `redis[s]://[user:pass@]host[:port][/db]` or bare `host:port` entries. */
function parseList(name: string, value: string, defaultPort: number): Entry[] {
  const parts = value
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  if (parts.length === 0) throw new ConfigError(`${name}: empty; give host:port or redis://host:port`);
  return parts.map((part, i) => {
    const where = parts.length > 1 ? ` (entry ${i + 1})` : '';
    return /^[a-z][a-z0-9+.-]*:\/\//i.test(part)
      ? parseUrl(name, where, part, defaultPort)
      : parseBare(name, where, part, defaultPort);
  });
}

function parseUrl(name: string, where: string, text: string, defaultPort: number): Entry {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ConfigError(`${name}${where}: not a valid URL`);
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
    throw new ConfigError(`${name}${where}: must start with redis:// or rediss://`);
  }
  if (!url.hostname) throw new ConfigError(`${name}${where}: names no host`);
  const path = url.pathname.replace(/^\/+/, '');
  if (path !== '' && !/^\d{1,2}$/.test(path)) {
    throw new ConfigError(`${name}${where}: the path must be a database number (redis://host:6379/0)`);
  }
  // ioredis honours `?password=` and `?db=` in a URL, so a URL written for it keeps
  // working here; any other parameter would be dropped without a word, so it is refused.
  const query = url.searchParams;
  for (const key of query.keys()) {
    if (key !== 'password' && key !== 'db') {
      throw new ConfigError(`${name}${where}: unsupported query parameter "${key}" (only password and db)`);
    }
  }
  const queryDb = query.get('db');
  if (queryDb !== null && !/^\d{1,2}$/.test(queryDb)) {
    throw new ConfigError(`${name}${where}: db must be a database number`);
  }
  const dbText = path !== '' ? path : queryDb;
  return {
    node: { host: stripBrackets(url.hostname), port: url.port ? Number(url.port) : defaultPort },
    tls: url.protocol === 'rediss:',
    username: url.username ? decode(name, where, url.username) : null,
    password: url.password ? decode(name, where, url.password) : query.get('password') || null,
    db: dbText === null ? null : Number(dbText),
  };
}

function parseBare(name: string, where: string, text: string, defaultPort: number): Entry {
  const m = /^(\[[^\]]+\]|[^:\s/@]+)(?::(\d{1,5}))?$/.exec(text);
  if (!m) throw new ConfigError(`${name}${where}: expected host:port or redis://host:port`);
  const port = m[2] === undefined ? defaultPort : Number(m[2]);
  if (port < 1 || port > 65_535) throw new ConfigError(`${name}${where}: port out of range`);
  return { node: { host: stripBrackets(m[1]!), port }, tls: null, username: null, password: null, db: null };
}

/** The one value the entries that give it agree on; entries may also leave it out. */
function agreed<T>(name: string, what: string, values: readonly (T | null)[]): T | null {
  const given = [...new Set(values.filter((v): v is T => v !== null))];
  if (given.length > 1) throw new ConfigError(`${name}: the entries give different ${what}s; give one`);
  return given[0] ?? null;
}

function decode(name: string, where: string, text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new ConfigError(`${name}${where}: the credentials hold a malformed %-escape`);
  }
}

function stripBrackets(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

/**
 * The hash tag of a key prefix (the part between the first `{` and the next `}`, when
 * not empty), as Redis Cluster computes it; null when there is none. BullMQ keeps a
 * queue's keys in one slot only through such a tag.
 */
export function hashTagOf(prefix: string): string | null {
  const open = prefix.indexOf('{');
  if (open < 0) return null;
  const close = prefix.indexOf('}', open + 1);
  return close > open + 1 ? prefix.slice(open + 1, close) : null;
}

/** The exit-2 error for a cluster and a prefix without a hash tag, with the fix. */
export function missingHashTagError(prefix: string): ConfigError {
  return new ConfigError(
    `QUEUE_PREFIX: Redis is a cluster and the prefix "${prefix}" has no hash tag, so a queue's keys would land in ` +
      `different slots and every job add would fail; set QUEUE_PREFIX={${prefix.replace(/[{}]/g, '') || 'feedsync'}} ` +
      '(consumers must use the same prefix)',
    'REDIS_NO_HASH_TAG',
  );
}
