import type { RedisSettings } from './redis-settings.js';
import type { FeedSource } from './sources-file.js';
import type { TracingSettings } from './tracing-settings.js';

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

/** Where the queues live: QUEUE_BACKEND. */
export type QueueBackend = 'redis' | 'postgres';
