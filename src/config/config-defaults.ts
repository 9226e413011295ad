/**
 * What each variable of the configuration is when the environment leaves it unset,
 * by name: the one place for these values. The Config fields name them; modules with
 * a default that must agree with the configuration's read it here.
 */
export const CONFIG_DEFAULTS = Object.freeze({
  /** The cursor key: an installation with one account needs no name for it. */
  FEED_SOURCE: 'default',
  /**
   * Events per page: pages of 100 weigh tens of kB, and a load of ten pages commits
   * 1,000 events in one transaction.
   */
  FEED_PAGE_LIMIT: 100,
  /**
   * Milliseconds, 10 minutes: below the CronJob's activeDeadlineSeconds (1,200 s), so a
   * run told to wait longer fails itself, cursor unchanged, before Kubernetes stops it.
   */
  FEED_MAX_RETRY_WAIT_MS: 600_000,
  /**
   * The share of a budget the service states that feedsync spends: half, the rest is
   * the application's own sends (docs/DEPLOYMENT.md, "The request budget").
   */
  FEED_RATE_SHARE: 0.5,
  /** Retries of one request: a passing 429 or 5xx is ridden out; past them the run fails, cursor unchanged, and the next run goes on. */
  FEED_MAX_RETRIES: 8,
  /** Milliseconds, 30 s: a page of tens of kB takes well under a second; a request that hangs is cut and retried. */
  FEED_TIMEOUT_MS: 30_000,
  /**
   * Bytes, 8 MiB: a parsed page costs several times its response until its commit is done,
   * and one of 16 MiB alone takes a worker near 300 MB (docs/BENCHMARKS.md), while real
   * pages of 100 events weigh tens of kB. It bounds a worker's memory.
   */
  FEED_MAX_RESPONSE_BYTES: 8 * 1024 * 1024,
  /** The local Postgres, as a developer's machine and the tests have it. */
  DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/postgres',
  /** Every table in a schema of feedsync's own, apart from the application's. */
  DATABASE_SCHEMA: 'feedsync',
  /** Milliseconds, 10 s: a new connection, TCP, TLS and start-up, takes far less; a wrong address fails soon, naming DATABASE_URL. */
  DATABASE_CONNECT_TIMEOUT_MS: 10_000,
  /**
   * Milliseconds, 10 s: how long feedsync waits for the answer to one statement before it
   * drops the connection and fails the turn. A page's statement takes well under a second;
   * a connection that stopped answering (a stuck backend, a dropped flow) must let its turn
   * and its lease go long before SOURCE_LEASE_MS, which it must stay below.
   */
  DATABASE_STATEMENT_TIMEOUT_MS: 10_000,
  /** The local Redis, as a developer's machine and the tests have it. */
  REDIS_URL: 'redis://127.0.0.1:6379',
  /** Redis, the faster of the two for throughput (docs/SCALING.md says when to choose Postgres). */
  QUEUE_BACKEND: 'redis',
  /** BullMQ's own default prefix, so its tools find the queues without being told. */
  QUEUE_PREFIX: 'bull',
  /** The queue of email.* events. */
  QUEUE_EMAIL_EVENTS: 'email-events',
  /** The queue of contact.* events. */
  QUEUE_CONTACT_EVENTS: 'contact-events',
  /** Hours, 7 days: as long as BullMQ keeps a completed job (JOB_RETENTION), so `requeue` reaches as far back. */
  OUTBOX_RETENTION_HOURS: 168,
  /** Runs of a job: with JOB_BACKOFF_MS's default, retries after 1, 2, 4 and 8 s, a consumer's short outage. */
  JOB_ATTEMPTS: 5,
  /** Milliseconds, 1 s: the first retry's delay, doubled for each later one. */
  JOB_BACKOFF_MS: 1_000,
  /** Milliseconds, 30 s: how far behind the feed a `sync --watch` worker lags at most when idle. */
  SYNC_INTERVAL_MS: 30_000,
  /**
   * Milliseconds, 15 minutes: three CronJob intervals, and below its activeDeadlineSeconds
   * (1,200 s), so a run stops itself (exit 4, what it read kept) before Kubernetes stops it.
   */
  SYNC_ONCE_MAX_MS: 900_000,
  /** Sources a worker runs at once: a few turns overlap their round trips to the service; docs/SCALING.md says when to raise it. */
  SYNC_CONCURRENCY: 4,
  /**
   * Milliseconds, 30 s: renewed at a third of it while a turn works, so a worker that
   * froze or was cut off gives its sources up within half a minute.
   */
  SOURCE_LEASE_MS: 30_000,
  /** The port of OpenTelemetry's Prometheus exporter, by convention. */
  METRICS_PORT: 9464,
  /** Every interface, as a pod needs. */
  METRICS_HOST: '0.0.0.0',
  /** What an operator reads: starts, stops, each run's summary and what goes wrong; debug adds the detail. */
  LOG_LEVEL: 'info',
  /** The usual port of an HTTP service in a container. */
  WEBHOOK_PORT: 8080,
  /** Every interface, as a pod needs. */
  WEBHOOK_HOST: '0.0.0.0',
  /** Bytes, 256 KiB: a delivery carries one event, far smaller; a larger body is refused (413) before it is held. */
  WEBHOOK_MAX_BODY_BYTES: 256 * 1024,
  /** The seed service's own `Service-Signature`; `standard` for senders that sign the Standard Webhooks way. */
  WEBHOOK_SCHEME: 'service',
} as const);
