import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import * as z from 'zod/mini';
import { nearest } from '../edit-distance.js';
import { ConfigError } from '../errors.js';
import { checkBaseUrl } from './base-url.js';
import { CONFIG_DEFAULTS } from './config-defaults.js';
import { splitUrls, urlEscapeProblem, urlSecrets } from './connection-url.js';
import { parseEventTypes } from './event-types.js';
import {
  hashTagOf,
  missingHashTagError,
  parseRedisSettings,
  type RedisEnv,
  type RedisSettings,
} from './redis-settings.js';
import { readMaxPerSecond, readRateShare } from './request-budget.js';
import { type FeedSource, loadSourcesFile, sourceNameProblem } from './sources-file.js';
import { parseTracing, type TracingSettings } from './tracing-settings.js';
import { unknownVariables, warnOnce } from './unknown-variables.js';

export type { FeedSource };

/**
 * The whole configuration, parsed once at start from the environment and frozen.
 * No other module reads `process.env`.
 */
export interface Config {
  readonly feed: {
    /** FEED_BASE_URL: ends in `/api`; https except for loopback hosts. Null when unset. */
    readonly baseUrl: string | null;
    /** FEED_API_KEY or FEED_API_KEY_FILE. Null when unset. */
    readonly apiKey: string | null;
    /** FEED_SOURCE: the cursor key, one per account. Default: CONFIG_DEFAULTS.FEED_SOURCE. */
    readonly source: string;
    /**
     * FEED_TYPES: full type names, sorted; null means every type. Each must be a type
     * of this release, or written `+name` for one the service added since.
     */
    readonly types: readonly string[] | null;
    /** FEED_PAGE_LIMIT: events asked for per page. Default: CONFIG_DEFAULTS.FEED_PAGE_LIMIT. */
    readonly pageLimit: number;
    /** FEED_LIST_FIELD: forces the name of the list field; null means auto. */
    readonly listField: string | null;
    /** FEED_MAX_RETRY_WAIT_MS: a Retry-After longer than this, in ms, fails the run. Default: CONFIG_DEFAULTS.FEED_MAX_RETRY_WAIT_MS. */
    readonly maxRetryWaitMs: number;
    /** FEED_RATE_SHARE: the share of a budget the service states that feedsync spends, in (0, 1]. Default: CONFIG_DEFAULTS.FEED_RATE_SHARE. */
    readonly rateShare: number;
    /** FEED_MAX_REQUESTS_PER_SECOND: requests a second to one account at most, stated budget or not; null for none (the default). */
    readonly maxRequestsPerSecond: number | null;
    /** FEED_MAX_RETRIES: retries of one request before the run fails. Default: CONFIG_DEFAULTS.FEED_MAX_RETRIES. */
    readonly maxRetries: number;
    /** FEED_TIMEOUT_MS: connect, headers and body timeout of one request, in ms. Default: CONFIG_DEFAULTS.FEED_TIMEOUT_MS. */
    readonly timeoutMs: number;
    /** FEED_MAX_RESPONSE_BYTES: a larger page fails the run. Default: CONFIG_DEFAULTS.FEED_MAX_RESPONSE_BYTES. */
    readonly maxResponseBytes: number;
  };
  /**
   * The accounts to sync: every entry of FEED_SOURCES_FILE, or without it the one
   * source of FEED_SOURCE / FEED_BASE_URL / FEED_API_KEY / FEED_TYPES.
   */
  readonly sources: readonly FeedSource[];
  /** FEED_SOURCES_FILE, or null when the one source of FEED_* is used. */
  readonly sourcesFile: string | null;
  /** SYNC_CONCURRENCY: sources a sync worker runs at once. Default: CONFIG_DEFAULTS.SYNC_CONCURRENCY. */
  readonly syncConcurrency: number;
  /**
   * SOURCE_LEASE_MS: how long a source's lease holds unless renewed (renewed at a third
   * of it while a turn works), in ms. A worker that froze or was cut off loses its
   * sources after this long. Default: CONFIG_DEFAULTS.SOURCE_LEASE_MS.
   */
  readonly sourceLeaseMs: number;
  /** HOSTNAME, else the system's host name: with the pid, who holds a lease (the pod's name in Kubernetes). */
  readonly hostName: string;
  readonly database: {
    /** DATABASE_URL. Default: CONFIG_DEFAULTS.DATABASE_URL. */
    readonly url: string;
    /** DATABASE_SCHEMA: where every table lives. Default: CONFIG_DEFAULTS.DATABASE_SCHEMA. */
    readonly schema: string;
    /**
     * DATABASE_CONNECT_TIMEOUT_MS: how long one new connection may take, TCP, TLS and
     * start-up included, in ms, before the command fails naming DATABASE_URL. Default:
     * CONFIG_DEFAULTS.DATABASE_CONNECT_TIMEOUT_MS.
     */
    readonly connectTimeoutMs: number;
    /**
     * DATABASE_STATEMENT_TIMEOUT_MS: how long one statement may wait for its answer, in ms,
     * before its connection is dropped and the statement fails; below SOURCE_LEASE_MS.
     * Default: CONFIG_DEFAULTS.DATABASE_STATEMENT_TIMEOUT_MS, or just under a shorter lease.
     */
    readonly statementTimeoutMs: number;
  };
  /**
   * REDIS_URL (default: CONFIG_DEFAULTS.REDIS_URL; several seed nodes comma-separated),
   * REDIS_CLUSTER (true, false; unset: ask the server), REDIS_SENTINELS,
   * REDIS_SENTINEL_NAME and REDIS_WAIT_REPLICAS (unset: chosen by the set-up found).
   */
  readonly redis: RedisSettings;
  readonly queues: {
    /**
     * QUEUE_BACKEND: where BullMQ keeps the queues, `redis` (REDIS_*) or `postgres`
     * (BullMQ's Postgres backend, in the database of QUEUE_DATABASE_URL, in the schema
     * QUEUE_PREFIX names; no Redis is then opened). Default: CONFIG_DEFAULTS.QUEUE_BACKEND.
     */
    readonly backend: QueueBackend;
    /** QUEUE_DATABASE_URL: the queues' Postgres when QUEUE_BACKEND=postgres. Default: DATABASE_URL. */
    readonly databaseUrl: string;
    /** QUEUE_PREFIX: BullMQ's key prefix in Redis, the queues' schema in Postgres. Default: CONFIG_DEFAULTS.QUEUE_PREFIX. */
    readonly prefix: string;
    /** QUEUE_EMAIL_EVENTS. Default: CONFIG_DEFAULTS.QUEUE_EMAIL_EVENTS. */
    readonly emailEvents: string;
    /** QUEUE_CONTACT_EVENTS. Default: CONFIG_DEFAULTS.QUEUE_CONTACT_EVENTS. */
    readonly contactEvents: string;
    /** OUTBOX_RETENTION_HOURS: published outbox rows kept for `requeue`, in hours. Default: CONFIG_DEFAULTS.OUTBOX_RETENTION_HOURS. */
    readonly outboxRetentionHours: number;
    /** JOB_ATTEMPTS: runs of a job before BullMQ fails it for good (1: never retried). Default: CONFIG_DEFAULTS.JOB_ATTEMPTS. */
    readonly jobAttempts: number;
    /** JOB_BACKOFF_MS: the first retry's delay, in ms; each later one doubles it. Default: CONFIG_DEFAULTS.JOB_BACKOFF_MS. */
    readonly jobBackoffMs: number;
  };
  /** EVENTS_RETENTION_DAYS: events that arrived longer ago are pruned (see eventsKeptMs); null keeps every event. */
  readonly eventsRetentionDays: number | null;
  /** SYNC_INTERVAL_MS: the pause between runs in watch mode, in ms. Default: CONFIG_DEFAULTS.SYNC_INTERVAL_MS. */
  readonly syncIntervalMs: number;
  /**
   * SYNC_ONCE_MAX_MS: how long a once run pages, in ms, before it stops, keeps what it
   * read and exits 4 (not caught up); the next run goes on from its cursor. Default:
   * CONFIG_DEFAULTS.SYNC_ONCE_MAX_MS.
   */
  readonly syncOnceMaxMs: number;
  /** METRICS_PORT: /metrics, /healthz, /readyz in watch mode; /metrics of serve-webhooks. Default: CONFIG_DEFAULTS.METRICS_PORT. */
  readonly metricsPort: number;
  /** METRICS_HOST: the interface they listen on. Default: CONFIG_DEFAULTS.METRICS_HOST. */
  readonly metricsHost: string;
  /** PUSHGATEWAY_URL: where a once run pushes its metrics; null means no push. */
  readonly pushgatewayUrl: string | null;
  /** LOG_LEVEL. Default: CONFIG_DEFAULTS.LOG_LEVEL. */
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /**
   * Started by npm (`npx feedsync`, `npm exec`: npm sets `npm_command`). npx ends on
   * SIGTERM or SIGINT without passing the signal on, so a long-running command follows
   * it: when npx is gone, it stops as on SIGTERM (src/cli/shutdown.ts).
   */
  readonly launchedByNpm: boolean;
  readonly webhooks: {
    /** WEBHOOK_SECRET or WEBHOOK_SECRET_FILE: comma-separated, several during a rotation. */
    readonly secrets: readonly string[];
    /** WEBHOOK_PORT. Default: CONFIG_DEFAULTS.WEBHOOK_PORT. */
    readonly port: number;
    /** WEBHOOK_HOST: the interface serve-webhooks listens on. Default: CONFIG_DEFAULTS.WEBHOOK_HOST. */
    readonly host: string;
    /** WEBHOOK_MAX_BODY_BYTES: the largest delivery taken, in bytes. Default: CONFIG_DEFAULTS.WEBHOOK_MAX_BODY_BYTES. */
    readonly maxBodyBytes: number;
    /**
     * WEBHOOK_SCHEME: `service` (the `Service-Signature` header) or `standard` (Standard
     * Webhooks: `webhook-*`/`svix-*` headers, `whsec_` secrets). Default: CONFIG_DEFAULTS.WEBHOOK_SCHEME.
     */
    readonly scheme: 'service' | 'standard';
  };
  /** OpenTelemetry traces (the standard OTEL_* variables); null, the default, exports none. */
  readonly tracing: TracingSettings | null;
  /** The variables the environment set (not left to their defaults), by name. */
  readonly given: readonly string[];
}

export type Env = Record<string, string | undefined>;

// zod/mini: the same checks as zod's full API, and the bundle takes only the ones
// used here (the full API costs a run about 70 ms and 7 MB at start-up). Every
// message is our own: the environment holds text, and zod/mini carries no wording.
/**
 * The longest delay Node's timers keep: a larger one fires after 1 ms (and from 2^32 a
 * RangeError), so a duration beyond it would end a run at once or never let a lease go.
 */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * Ten years of hours: the longest OUTBOX_RETENTION_HOURS. Pruning turns it into an
 * interval in ms (an int4 parameter, and the events' guard adds it to EVENTS_RETENTION_DAYS),
 * which a larger value overflows on every round; and past ten years it is a slip of the unit.
 */
const MAX_RETENTION_HOURS = 87_600;

const int = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z.pipe(
    z.pipe(
      // "-1" is a number, just not one taken here: the words say which are.
      z
        .string()
        .check(
          z.regex(
            /^\d+$/,
            min >= 1 ? 'must be a positive whole number' : 'must be a whole number, 0 or more',
          ),
        ),
      z.transform(Number),
    ),
    z
      .number()
      .check(
        z.minimum(min, `must be at least ${min}`),
        z.maximum(max, max === Number.MAX_SAFE_INTEGER ? 'is too large' : `must be at most ${max}`),
      ),
  );
/** A duration in ms that a timer will wait: at most MAX_TIMER_MS, said so. */
const ms = (min: number) =>
  z.pipe(
    int(min),
    z
      .number()
      .check(
        z.maximum(
          MAX_TIMER_MS,
          `must be at most ${MAX_TIMER_MS} (about 24.8 days, the longest timer Node keeps)`,
        ),
      ),
  );
const oneOf = <const T extends readonly [string, ...string[]]>(values: T) =>
  z.enum(values, `must be one of ${values.join(', ')}`);
const nonEmpty = z.string().check(z.minLength(1, 'must not be empty'));

const identifier = z.string().check(z.regex(/^[a-z_][a-z0-9_]{0,62}$/, 'must be a lowercase SQL identifier'));
const host = z
  .string()
  .check(
    z.regex(
      /^(\[[0-9a-fA-F:.]+\]|[0-9a-fA-F:.]*:[0-9a-fA-F:.]*|[A-Za-z0-9.-]+)$/,
      'must be an IP address or a host name',
    ),
  );
/** Where the queues live: QUEUE_BACKEND. */
export type QueueBackend = 'redis' | 'postgres';

/** The queues' schema, as DATABASE_SCHEMA: a lowercase identifier (BullMQ's own rule allows more). */
const QUEUE_SCHEMA = /^[a-z_][a-z0-9_]{0,62}$/;

const queueName = z.string().check(z.regex(/^[^:\s]+$/, 'must be non-empty, without ":" or spaces'));

const fields = {
  FEED_BASE_URL: z.optional(z.string()),
  FEED_API_KEY: z.optional(nonEmpty),
  FEED_SOURCE: z._default(
    nonEmpty.check(z.maxLength(200, 'must be at most 200 characters')),
    CONFIG_DEFAULTS.FEED_SOURCE,
  ),
  FEED_TYPES: z.optional(z.string()),
  FEED_PAGE_LIMIT: z._default(int(1, 10_000), CONFIG_DEFAULTS.FEED_PAGE_LIMIT),
  FEED_LIST_FIELD: z.optional(nonEmpty),
  FEED_MAX_RETRY_WAIT_MS: z._default(ms(0), CONFIG_DEFAULTS.FEED_MAX_RETRY_WAIT_MS),
  FEED_MAX_RETRIES: z._default(int(0, 100), CONFIG_DEFAULTS.FEED_MAX_RETRIES),
  FEED_RATE_SHARE: z.optional(z.string()),
  FEED_MAX_REQUESTS_PER_SECOND: z.optional(z.string()),
  FEED_TIMEOUT_MS: z._default(ms(1), CONFIG_DEFAULTS.FEED_TIMEOUT_MS),
  FEED_MAX_RESPONSE_BYTES: z._default(int(1024), CONFIG_DEFAULTS.FEED_MAX_RESPONSE_BYTES),
  DATABASE_URL: z._default(z.string(), CONFIG_DEFAULTS.DATABASE_URL),
  DATABASE_SCHEMA: z._default(identifier, CONFIG_DEFAULTS.DATABASE_SCHEMA),
  DATABASE_CONNECT_TIMEOUT_MS: z._default(int(1, 600_000), CONFIG_DEFAULTS.DATABASE_CONNECT_TIMEOUT_MS),
  DATABASE_STATEMENT_TIMEOUT_MS: z.optional(int(100, 3_600_000)),
  REDIS_URL: z._default(z.string(), CONFIG_DEFAULTS.REDIS_URL),
  REDIS_CLUSTER: z.optional(
    z.pipe(
      z.enum(['true', 'false'], 'must be true or false'),
      z.transform((v) => v === 'true'),
    ),
  ),
  REDIS_SENTINELS: z.optional(z.string()),
  REDIS_SENTINEL_NAME: z.optional(nonEmpty),
  REDIS_WAIT_REPLICAS: z.optional(int(0, 16)),
  QUEUE_BACKEND: z._default(oneOf(['redis', 'postgres']), CONFIG_DEFAULTS.QUEUE_BACKEND),
  QUEUE_DATABASE_URL: z.optional(z.string()),
  QUEUE_PREFIX: z._default(queueName, CONFIG_DEFAULTS.QUEUE_PREFIX),
  QUEUE_EMAIL_EVENTS: z._default(queueName, CONFIG_DEFAULTS.QUEUE_EMAIL_EVENTS),
  QUEUE_CONTACT_EVENTS: z._default(queueName, CONFIG_DEFAULTS.QUEUE_CONTACT_EVENTS),
  OUTBOX_RETENTION_HOURS: z._default(int(0, MAX_RETENTION_HOURS), CONFIG_DEFAULTS.OUTBOX_RETENTION_HOURS),
  JOB_ATTEMPTS: z._default(int(1, 1_000), CONFIG_DEFAULTS.JOB_ATTEMPTS),
  JOB_BACKOFF_MS: z._default(int(0, 86_400_000), CONFIG_DEFAULTS.JOB_BACKOFF_MS),
  EVENTS_RETENTION_DAYS: z.optional(int(1, 36_500)),
  SYNC_INTERVAL_MS: z._default(ms(1), CONFIG_DEFAULTS.SYNC_INTERVAL_MS),
  SYNC_ONCE_MAX_MS: z._default(ms(1), CONFIG_DEFAULTS.SYNC_ONCE_MAX_MS),
  SYNC_CONCURRENCY: z._default(int(1, 256), CONFIG_DEFAULTS.SYNC_CONCURRENCY),
  SOURCE_LEASE_MS: z._default(int(1000, 3_600_000), CONFIG_DEFAULTS.SOURCE_LEASE_MS),
  FEED_SOURCES_FILE: z.optional(z.string()),
  HOSTNAME: z.optional(z.string()),
  METRICS_PORT: z._default(int(0, 65_535), CONFIG_DEFAULTS.METRICS_PORT),
  METRICS_HOST: z._default(host, CONFIG_DEFAULTS.METRICS_HOST),
  PUSHGATEWAY_URL: z.optional(z.url('must be a URL')),
  LOG_LEVEL: z._default(
    oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
    CONFIG_DEFAULTS.LOG_LEVEL,
  ),
  WEBHOOK_SECRET: z.optional(nonEmpty),
  WEBHOOK_PORT: z._default(int(0, 65_535), CONFIG_DEFAULTS.WEBHOOK_PORT),
  WEBHOOK_HOST: z._default(host, CONFIG_DEFAULTS.WEBHOOK_HOST),
  WEBHOOK_MAX_BODY_BYTES: z._default(int(1), CONFIG_DEFAULTS.WEBHOOK_MAX_BODY_BYTES),
  WEBHOOK_SCHEME: z._default(oneOf(['service', 'standard']), CONFIG_DEFAULTS.WEBHOOK_SCHEME),
};

/** Variables whose value may come from a file named by `<NAME>_FILE` (a mounted secret). */
const FILE_VARIANTS = [
  'FEED_API_KEY',
  'WEBHOOK_SECRET',
  'DATABASE_URL',
  'REDIS_URL',
  'QUEUE_DATABASE_URL',
] as const;

/** Every variable loadConfig reads, `<NAME>_FILE` included: what a misspelt name is told apart from. */
export const VARIABLES: readonly string[] = [
  ...Object.keys(fields),
  ...FILE_VARIANTS.map((n) => `${n}_FILE`),
];

/** The warnings for this environment and the config loaded from it: variables that look like feedsync's and are not. */
export function variableWarnings(env: Env, config: Config): string[] {
  const keys = config.sources.flatMap((s) => (s.apiKey ? [s.apiKey] : []));
  return unknownVariables(env, VARIABLES, keys);
}

/**
 * Parses the environment into a frozen Config, or throws a ConfigError naming the
 * first variable that is wrong. `readFile` is injectable for tests. With `keys: false`
 * the key files of FEED_SOURCES_FILE are not read (their entries get no key): for a
 * command that never calls the service, which would otherwise read one file a source.
 * A variable that looks like one of feedsync's and is not (`QUEUE_PREFX`) is warned of,
 * once per process, through `warn` (default: a process warning).
 */
/**
 * Whether npm started this process (`npx feedsync`, `npm exec`: npm sets `npm_command`).
 * For Config.launchedByNpm, and for `simulator`, which loads no configuration.
 */
export function launchedByNpm(env: Env = process.env): boolean {
  return env.npm_command !== undefined;
}

export function loadConfig(
  env: Env = process.env,
  readFile = (p: string) => readFileSync(p, 'utf8'),
  opts: { keys?: boolean; warn?: (warning: string) => void } = {},
): Config {
  const { raw, values: v } = parseFields(fields, env, readFile);

  if (v.FEED_BASE_URL !== undefined) {
    const problem = checkBaseUrl(v.FEED_BASE_URL);
    if (problem) throw new ConfigError(`FEED_BASE_URL: ${problem}`);
  }
  checkUrl('DATABASE_URL', v.DATABASE_URL, ['postgres:', 'postgresql:']);
  // A stuck statement must fail its turn, and so give the lease back, before the lease runs out.
  const statementTimeoutMs =
    v.DATABASE_STATEMENT_TIMEOUT_MS ??
    Math.min(CONFIG_DEFAULTS.DATABASE_STATEMENT_TIMEOUT_MS, v.SOURCE_LEASE_MS - 1);
  if (statementTimeoutMs >= v.SOURCE_LEASE_MS)
    throw new ConfigError(
      `DATABASE_STATEMENT_TIMEOUT_MS: must be below SOURCE_LEASE_MS (${v.SOURCE_LEASE_MS}), so that a stuck statement lets its lease go`,
    );
  const { redis, queues } = queueSettings(v);

  const sourceProblem = sourceNameProblem(v.FEED_SOURCE);
  if (sourceProblem) throw new ConfigError(`FEED_SOURCE: ${sourceProblem}`);
  const types = parseTypes(v.FEED_TYPES);
  const rateShare =
    named('FEED_RATE_SHARE', v.FEED_RATE_SHARE, readRateShare) ?? CONFIG_DEFAULTS.FEED_RATE_SHARE;
  const maxRequestsPerSecond = named(
    'FEED_MAX_REQUESTS_PER_SECOND',
    v.FEED_MAX_REQUESTS_PER_SECOND,
    readMaxPerSecond,
  );
  const baseUrl = v.FEED_BASE_URL?.replace(/\/+$/, '') ?? null;
  const apiKey = v.FEED_API_KEY ?? null;
  const sources =
    v.FEED_SOURCES_FILE === undefined
      ? [{ source: v.FEED_SOURCE, baseUrl, apiKey, keyProblem: null, types }]
      : loadSourcesFile(
          v.FEED_SOURCES_FILE,
          { baseUrl, apiKey, types },
          { env, readFile, parseTypes: parseEventTypes, readKeyFiles: opts.keys ?? true },
        );

  const config: Config = {
    sources,
    sourcesFile: v.FEED_SOURCES_FILE ?? null,
    syncConcurrency: v.SYNC_CONCURRENCY,
    sourceLeaseMs: v.SOURCE_LEASE_MS,
    hostName: (v.HOSTNAME ?? hostname()).slice(0, 63),
    feed: {
      baseUrl,
      apiKey,
      source: v.FEED_SOURCE,
      types,
      pageLimit: v.FEED_PAGE_LIMIT,
      listField: v.FEED_LIST_FIELD ?? null,
      maxRetryWaitMs: v.FEED_MAX_RETRY_WAIT_MS,
      maxRetries: v.FEED_MAX_RETRIES,
      rateShare,
      maxRequestsPerSecond,
      timeoutMs: v.FEED_TIMEOUT_MS,
      maxResponseBytes: v.FEED_MAX_RESPONSE_BYTES,
    },
    database: {
      url: v.DATABASE_URL,
      schema: v.DATABASE_SCHEMA,
      connectTimeoutMs: v.DATABASE_CONNECT_TIMEOUT_MS,
      statementTimeoutMs,
    },
    redis,
    queues: {
      ...queues,
      jobAttempts: v.JOB_ATTEMPTS,
      jobBackoffMs: v.JOB_BACKOFF_MS,
    },
    eventsRetentionDays: v.EVENTS_RETENTION_DAYS ?? null,
    syncIntervalMs: v.SYNC_INTERVAL_MS,
    syncOnceMaxMs: v.SYNC_ONCE_MAX_MS,
    metricsPort: v.METRICS_PORT,
    metricsHost: unbracket(v.METRICS_HOST),
    pushgatewayUrl: v.PUSHGATEWAY_URL ?? null,
    logLevel: v.LOG_LEVEL,
    launchedByNpm: launchedByNpm(env),
    webhooks: {
      secrets: (v.WEBHOOK_SECRET ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
      port: v.WEBHOOK_PORT,
      host: unbracket(v.WEBHOOK_HOST),
      maxBodyBytes: v.WEBHOOK_MAX_BODY_BYTES,
      scheme: v.WEBHOOK_SCHEME,
    },
    tracing: parseTracing(env),
    given: Object.keys(raw).filter((name) => raw[name] !== undefined),
  };
  warnOnce(variableWarnings(env, config), opts.warn);
  return deepFreeze(config);
}

/** The variables of `shape` read from `env` (`<NAME>_FILE` too), checked; or a ConfigError naming the first wrong one. */
function parseFields<S extends Partial<typeof fields>>(
  shape: S,
  env: Env,
  readFile: (p: string) => string,
): { raw: Env; values: z.infer<z.ZodMiniObject<S>> } {
  const raw: Env = {};
  for (const name of Object.keys(shape)) {
    const value = env[name];
    raw[name] = value === '' ? undefined : value;
  }
  for (const name of FILE_VARIANTS.filter((n) => n in shape)) {
    const file = env[`${name}_FILE`];
    if (!file) continue;
    if (raw[name] !== undefined)
      throw new ConfigError(`${name}: set either ${name} or ${name}_FILE, not both`);
    try {
      raw[name] = readFile(file).trim();
    } catch (err) {
      throw new ConfigError(
        `${name}_FILE: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      );
    }
  }
  const parsed = z.object(shape).safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const name = String(issue.path[0]);
    // The message names the variable, never its value: it may be a secret.
    throw new ConfigError(`${name}: ${issue.message}`);
  }
  return { raw, values: parsed.data };
}

/**
 * What a consumer (`feedsync/consumer`) reads of the environment: the queues'
 * Redis and names, and how long feedsync may hand an event over again, with the
 * worker's names, defaults and checks, so that both ends agree.
 */
export interface ConsumerSettings {
  readonly redis: RedisSettings;
  readonly queues: Pick<
    Config['queues'],
    'backend' | 'databaseUrl' | 'prefix' | 'emailEvents' | 'contactEvents' | 'outboxRetentionHours'
  >;
  readonly logLevel: Config['logLevel'];
}

/**
 * Parses the consumer's variables (REDIS_*, QUEUE_*, DATABASE_URL as QUEUE_DATABASE_URL's
 * default, OUTBOX_RETENTION_HOURS, LOG_LEVEL) when a consumer is created.
 */
export function loadConsumerSettings(
  env: Env = process.env,
  readFile = (p: string) => readFileSync(p, 'utf8'),
): ConsumerSettings {
  const { values: v } = parseFields(
    {
      REDIS_URL: fields.REDIS_URL,
      REDIS_CLUSTER: fields.REDIS_CLUSTER,
      REDIS_SENTINELS: fields.REDIS_SENTINELS,
      REDIS_SENTINEL_NAME: fields.REDIS_SENTINEL_NAME,
      REDIS_WAIT_REPLICAS: fields.REDIS_WAIT_REPLICAS,
      DATABASE_URL: fields.DATABASE_URL,
      QUEUE_BACKEND: fields.QUEUE_BACKEND,
      QUEUE_DATABASE_URL: fields.QUEUE_DATABASE_URL,
      QUEUE_PREFIX: fields.QUEUE_PREFIX,
      QUEUE_EMAIL_EVENTS: fields.QUEUE_EMAIL_EVENTS,
      QUEUE_CONTACT_EVENTS: fields.QUEUE_CONTACT_EVENTS,
      OUTBOX_RETENTION_HOURS: fields.OUTBOX_RETENTION_HOURS,
      LOG_LEVEL: fields.LOG_LEVEL,
    },
    env,
    readFile,
  );
  return deepFreeze({ ...queueSettings(v), logLevel: v.LOG_LEVEL });
}

/**
 * The queues' store and names, read alike by the worker and a consumer. A forced
 * cluster is checked for a hash tag in the prefix now; a detected one when feedsync
 * first connects. In Postgres the prefix names a schema, so it must be an identifier.
 */
function queueSettings(
  v: RedisEnv & {
    DATABASE_URL: string;
    QUEUE_BACKEND: QueueBackend;
    QUEUE_DATABASE_URL?: string | undefined;
    QUEUE_PREFIX: string;
    QUEUE_EMAIL_EVENTS: string;
    QUEUE_CONTACT_EVENTS: string;
    OUTBOX_RETENTION_HOURS: number;
  },
): Pick<ConsumerSettings, 'redis' | 'queues'> {
  const redis = parseRedisSettings(v);
  const databaseUrl = v.QUEUE_DATABASE_URL ?? v.DATABASE_URL;
  if (v.QUEUE_BACKEND === 'postgres') {
    checkUrl(v.QUEUE_DATABASE_URL === undefined ? 'DATABASE_URL' : 'QUEUE_DATABASE_URL', databaseUrl, [
      'postgres:',
      'postgresql:',
    ]);
    if (!QUEUE_SCHEMA.test(v.QUEUE_PREFIX)) {
      throw new ConfigError(
        "QUEUE_PREFIX: with QUEUE_BACKEND=postgres it names the queues' schema: must be a lowercase SQL identifier",
      );
    }
  } else if (redis.cluster === true && hashTagOf(v.QUEUE_PREFIX) === null) {
    throw missingHashTagError(v.QUEUE_PREFIX);
  }
  return {
    redis,
    queues: {
      backend: v.QUEUE_BACKEND,
      databaseUrl,
      prefix: v.QUEUE_PREFIX,
      emailEvents: v.QUEUE_EMAIL_EVENTS,
      contactEvents: v.QUEUE_CONTACT_EVENTS,
      outboxRetentionHours: v.OUTBOX_RETENTION_HOURS,
    },
  };
}

/**
 * The config with `source` as its only source (`sync --source`): a source of
 * FEED_SOURCES_FILE, or without the file any name, read as FEED_SOURCE would be.
 * A name not in the file is refused (exit 2).
 */
export function onlySource(config: Config, source: string): Config {
  const own = configForSource(config, source);
  const entry = config.sources.find((s) => s.source === source);
  const { baseUrl, apiKey, types } = own.feed;
  return deepFreeze({
    ...own,
    sources: [
      {
        source,
        baseUrl,
        apiKey,
        keyProblem: entry?.keyProblem ?? null,
        types,
        ...(entry?.budget ? { budget: entry.budget } : {}),
      },
    ],
  });
}

/** The base URL and key, for the commands that talk to the service. */
export function requireService(config: Config): { baseUrl: string; apiKey: string } {
  if (config.feed.baseUrl === null) throw new ConfigError('FEED_BASE_URL: required for this command');
  if (config.feed.apiKey === null)
    throw new ConfigError('FEED_API_KEY: required for this command (or FEED_API_KEY_FILE)');
  return { baseUrl: config.feed.baseUrl, apiKey: config.feed.apiKey };
}

/**
 * The config as the one-source run of `source` sees it: `feed` carries that source's
 * base URL, key and types. With FEED_SOURCES_FILE, a name not in the file is refused;
 * without it, any name reads with FEED_BASE_URL / FEED_API_KEY / FEED_TYPES, as before.
 */
export function configForSource(config: Config, source: string): Config {
  const problem = sourceNameProblem(source);
  if (problem) throw new ConfigError(`source ${JSON.stringify(source)}: ${problem}`);
  const entry = config.sources.find((s) => s.source === source);
  if (!entry && config.sourcesFile !== null) {
    const names = config.sources.map((s) => s.source);
    const guess = nearest(source, names);
    throw new ConfigError(
      `source "${source}" is not in FEED_SOURCES_FILE (${names.slice(0, 10).join(', ')}` +
        `${names.length > 10 ? `, and ${names.length - 10} more` : ''})` +
        `${guess === null ? '' : `; did you mean "${guess}"?`}; give --source one of them`,
    );
  }
  const own = entry
    ? {
        baseUrl: entry.baseUrl,
        apiKey: entry.apiKey,
        types: entry.types,
        ...(entry.budget?.share === undefined ? {} : { rateShare: entry.budget.share }),
        ...(entry.budget?.maxPerSecond === undefined
          ? {}
          : { maxRequestsPerSecond: entry.budget.maxPerSecond }),
      }
    : {};
  return deepFreeze({ ...config, feed: { ...config.feed, ...own, source } });
}

/** Every secret value in the config, for the logger to scrub from its output. */
export function secretsOf(config: Config): string[] {
  const secrets = [...config.webhooks.secrets];
  if (config.feed.apiKey) secrets.push(config.feed.apiKey);
  for (const s of config.sources) if (s.apiKey) secrets.push(s.apiKey);
  secrets.push(
    ...urlSecrets(config.database.url),
    ...urlSecrets(config.queues.databaseUrl),
    ...urlSecrets(config.redis.url),
  );
  if (config.tracing) secrets.push(...urlSecrets(config.tracing.url));
  for (const p of [config.redis.password, config.redis.sentinel?.password]) {
    if (p) secrets.push(p, encodeURIComponent(p));
  }
  return secrets.filter((s) => s.length >= 4);
}

/** A variable read by `read` when set, its complaint named after it (exit 2). */
function named<T>(name: string, value: string | undefined, read: (value: string) => T): T | null {
  if (value === undefined) return null;
  try {
    return read(value);
  } catch (err) {
    throw new ConfigError(`${name}: ${(err as Error).message}`);
  }
}

function parseTypes(value: string | undefined): readonly string[] | null {
  if (value === undefined) return null;
  try {
    return parseEventTypes(value.split(','));
  } catch (err) {
    throw new ConfigError(`FEED_TYPES: ${(err as Error).message}`);
  }
}

/** Each URL of the value parses, has an allowed scheme, and %-decodes as the drivers will decode it. */
function checkUrl(name: string, value: string, protocols: string[]): void {
  for (const part of splitUrls(value)) {
    let url: URL;
    try {
      url = new URL(part);
    } catch {
      throw new ConfigError(`${name}: not a valid URL`);
    }
    if (!protocols.includes(url.protocol)) {
      throw new ConfigError(`${name}: must start with ${protocols.map((p) => `${p}//`).join(' or ')}`);
    }
    const problem = urlEscapeProblem(url);
    if (problem) throw new ConfigError(`${name}: ${problem}`);
  }
}

/** `[::1]` as the address listen() takes. */
function unbracket(value: string): string {
  return value.startsWith('[') && value.endsWith(']') ? value.slice(1, -1) : value;
}

function deepFreeze<T>(value: T): T {
  // What is frozen here was frozen whole: a turn's configForSource need not walk every source again.
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}
