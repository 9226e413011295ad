import { logRetries, type RetryDeps } from '../api/retry.js';
import { accountOf, type BudgetTally } from '../budget/request-budgets.js';
import { maxBackoffMs } from '../config/backoff.js';
import type { Config } from '../config/config-type.js';
import { type KeyKind, keyKindOf } from '../config/key-kind.js';
import { secretsOf } from '../config/secrets.js';
import { configForSource, requireService } from '../config/source-config.js';
import type { FeedClientOptions } from '../feed/feed-client.js';
import { type Logger, loggerFor } from '../logger.js';
import { routeFor } from '../queue/routes.js';
import type { LeaseOptions } from '../store/lease-renewal.js';
import {
  budgetsFor,
  composeParts,
  type FeedReader,
  feedReaderFor,
  type GivenParts,
  leaseOptionsFor,
  type Parts,
  type PartsShape,
} from './parts.js';

// The worker's composition: the one place the worker (sync/worker.ts) reads the Config.
// What it returns is the values the rounds and the turns use, and the few makers of
// parts that stay bound to the Config here (the pool, the publisher, a source's feed).

/** What the once and the watch rounds read of the configuration. */
export interface RoundSettings {
  /** SYNC_CONCURRENCY: turns at a time. */
  readonly concurrency: number;
  /** SYNC_INTERVAL_MS: the pause between a source's turns. */
  readonly intervalMs: number;
  /** Who holds the leases this worker takes, for SOURCE_LEASE_MS; a watch's turns also for how long they may stall. */
  readonly lease: LeaseOptions;
  /** The per-worker rounds of a watch (lease rows, the outbox's sweep): once two intervals, between 1 and 60 s. */
  readonly upkeepMs: number;
  /** SYNC_ONCE_MAX_MS: a once run's own end. */
  readonly onceMaxMs: number;
  /** Whether the sources come from FEED_SOURCES_FILE: the summary of a once run then names no single source. */
  readonly fromFile: boolean;
  /** EVENTS_RETENTION_DAYS (null: events are kept) and OUTBOX_RETENTION_HOURS: what the rounds prune. */
  readonly eventsRetentionDays: number | null;
  readonly outboxRetentionHours: number;
  /** A watch's /healthz, /readyz and /metrics: METRICS_PORT, METRICS_HOST, and when its loop is stale (ms). */
  readonly health: { readonly port: number; readonly host: string; readonly staleAfterMs: number };
}

/** What a feed reader tells of its requests: its retries, and each response timed. */
export interface FeedHooks {
  onRetry?: RetryDeps['onRetry'];
  onFeedResponse?: FeedClientOptions['onResponse'];
}

/** What a source's turns need to know of the configuration. */
export interface SourceSettings {
  /** The cursor key (FEED_SOURCE, or a source of FEED_SOURCES_FILE). */
  source: string;
  /** Its FEED_TYPES: what its cursor was built with. */
  types: readonly string[] | null;
  /** The kind of its API key (test or live; null: neither), which its cursor remembers. */
  keyKind: KeyKind | null;
  /** FEED_MAX_RESPONSE_BYTES: the budget of the pages in memory. */
  maxPageBytes: number;
  /** Who holds the lease, and for how long (SOURCE_LEASE_MS). */
  lease: LeaseOptions;
  /** EVENTS_RETENTION_DAYS: where a reconcile may start. */
  eventsRetentionDays: number | null;
}

/** What one source's turns get of the configuration: its settings, and a reader of its feed. */
export interface SourcePlan {
  readonly settings: SourceSettings;
  /** Why its key file could not be read; its every turn fails with it. */
  readonly keyProblem: string | null;
  /** Readers of its feed, one per turn: retries logged and told to `hooks`, responses timed by them. */
  openFeed(logger: Logger, hooks: FeedHooks, retryDeps?: RetryDeps): () => FeedReader;
}

/** A worker's plan: everything it reads of the Config, once. */
export interface WorkerPlan {
  readonly mode: 'once' | 'watch';
  /** The given logger, else one at the config's LOG_LEVEL that scrubs its secrets (`loggerFor(config)`). */
  readonly logger: Logger;
  readonly names: readonly string[];
  readonly settings: RoundSettings;
  /** Postgres connections at most; none for an embedding, whose pool keeps the store's default size. */
  readonly poolMax: number | undefined;
  /** `sync --migrate`: apply pending migrations instead of refusing to run. */
  readonly autoMigrate: boolean;
  /** Every secret of the config, scrubbed from the lease rows' failure lines. */
  readonly secrets: readonly string[];
  /** The request budgets' waits and 429s, for the metrics. */
  readonly budgetTally: BudgetTally;
  /** The routes of the events to their queues, and the applier's bound on a transaction (SOURCE_LEASE_MS). */
  readonly route: ReturnType<typeof routeFor>;
  readonly applyLeaseMs: number;
  /** The worker's store, publisher and relay; `given` ones are used as they are. */
  parts(shape: PartsShape, given?: GivenParts): Parts;
  /** A source's plan, made when first asked for (a fleet may hold many thousands). */
  source(name: string): SourcePlan;
  /** The account of a source (a hash of its key) and whether its request budget paces it now. */
  accountOf(source: string): { account: string; paced: boolean } | null;
}

export interface PlanOptions {
  mode: 'once' | 'watch';
  migrate?: boolean;
  /** The sources an embedding runs; default every source of the config (and then a service is required without a sources file). */
  sources?: readonly string[];
  /** Default: a logger at the config's LOG_LEVEL that scrubs its secrets (`loggerFor(config)`). */
  logger?: Logger | undefined;
}

export function planWorker(config: Config, opts: PlanOptions): WorkerPlan {
  // Without a sources file the one source needs FEED_BASE_URL and a key: a usage error at start.
  if (opts.sources === undefined && config.sourcesFile === null) requireService(config);
  const settings = roundSettings(config, opts.mode);
  const entries = new Map(config.sources.map((s) => [s.source, s]));
  const logger = opts.logger ?? loggerFor(config);
  const budgets = budgetsFor(config, logger);
  return {
    mode: opts.mode,
    logger,
    names: opts.sources ?? config.sources.map((s) => s.source),
    settings,
    // Per turn in flight, one connection for its commits; then the relay's, and one for
    // claims, renewals, gauges and the schema check. No connection holds a source.
    poolMax: opts.sources === undefined ? settings.concurrency + 2 : undefined,
    autoMigrate: opts.migrate === true,
    secrets: secretsOf(config),
    budgetTally: budgets.tally,
    route: routeFor(config.queues),
    applyLeaseMs: config.sourceLeaseMs,
    parts: (shape, given) => composeParts(config, logger, shape, given),
    source: (name) => {
      const own = configForSource(config, name);
      return {
        settings: {
          source: own.feed.source,
          types: own.feed.types,
          keyKind: keyKindOf(own.feed.apiKey),
          maxPageBytes: own.feed.maxResponseBytes,
          lease: leaseOptionsFor(own),
          eventsRetentionDays: own.eventsRetentionDays,
        },
        keyProblem: entries.get(name)?.keyProblem ?? null,
        openFeed: (logger, hooks, retryDeps) => feedOf(own, logger, hooks, retryDeps),
      };
    },
    // From the source's entry as configForSource reads it (its key and limits, else the
    // variables'), found by name in a map made once: the scheduler asks for every source it passes over.
    accountOf: (source) => {
      const entry = entries.get(source);
      const key = entry ? entry.apiKey : config.feed.apiKey;
      if (key === null) return null;
      const limits = {
        share: entry?.budget?.share ?? config.feed.rateShare,
        maxPerSecond:
          entry?.budget?.maxPerSecond === undefined
            ? config.feed.maxRequestsPerSecond
            : entry.budget.maxPerSecond,
      };
      return { account: accountOf(key), paced: budgets.forKey(key, limits).rate() !== null };
    },
  };
}

function roundSettings(config: Config, mode: 'once' | 'watch'): RoundSettings {
  const lease = leaseOptionsFor(config);
  return {
    concurrency: config.syncConcurrency,
    intervalMs: config.syncIntervalMs,
    // Between two signs of progress a watch's turn waits for one statement (under the
    // lease) and for feed requests: its own, and, with pages near the response limit,
    // those of the lanes ahead of it in line for the shared budget of the feed's bytes,
    // one a lane (FEED_TIMEOUT_MS each). A retry's back-off is announced as it starts.
    // A once run's turns need no such watch: SYNC_ONCE_MAX_MS ends them all.
    lease:
      mode === 'watch'
        ? { ...lease, stallMs: config.sourceLeaseMs + config.syncConcurrency * config.feed.timeoutMs }
        : lease,
    // Twice an interval, not once: at the default 30 s the sweep (four statements) and the
    // lease rows' upkeep (one) ran twice a minute on an idle replica, a third of what a
    // caught-up deployment cost its Postgres; a minute is still far under the relay's own
    // default sweep and under any alert (docs/BENCHMARKS.md, idle).
    upkeepMs: Math.min(60_000, Math.max(1_000, 2 * config.syncIntervalMs)),
    onceMaxMs: config.syncOnceMaxMs,
    fromFile: config.sourcesFile !== null,
    eventsRetentionDays: config.eventsRetentionDays,
    outboxRetentionHours: config.queues.outboxRetentionHours,
    health: { port: config.metricsPort, host: config.metricsHost, staleAfterMs: livenessDeadlineMs(config) },
  };
}

/**
 * How long a watch's loop may go without a beat. It beats at each claim, each commit and
 * each retry: between two beats it either sleeps (at most the longest back-off) or waits
 * on one request (two timeouts, or a Retry-After up to FEED_MAX_RETRY_WAIT_MS). Stale
 * after the longer of the two plus three intervals (docs/DEPLOYMENT.md, livenessProbe).
 */
function livenessDeadlineMs(config: Config): number {
  const { syncIntervalMs, feed } = config;
  return (
    Math.max(maxBackoffMs(syncIntervalMs), 2 * feed.timeoutMs + feed.maxRetryWaitMs) + 3 * syncIntervalMs
  );
}

/** How long a feed request goes unanswered before the log says it is waiting, in ms. */
const FEED_WAIT_NOTICE_MS = 5_000;

/** Readers of the feed of the source `own` describes (configForSource), one per turn. */
function feedOf(own: Config, logger: Logger, hooks: FeedHooks, retryDeps: RetryDeps = {}): () => FeedReader {
  const log = logger.child({ module: 'sync' });
  const logRetry = logRetries(log);
  const timeoutMs = own.feed.timeoutMs;
  // A request still unanswered after a few seconds is said, once: the wait may be all of FEED_TIMEOUT_MS.
  const waiting = {
    afterMs: Math.min(FEED_WAIT_NOTICE_MS, Math.round(timeoutMs / 2)),
    tell: (waitedMs: number) =>
      log.info(
        { waitedMs, timeoutMs },
        `waiting for the feed: no answer after ${waitedMs / 1000} s; the request is given up at FEED_TIMEOUT_MS (${timeoutMs} ms)`,
      ),
  };
  return () =>
    feedReaderFor(own, {
      waiting,
      retryDeps: {
        ...retryDeps,
        onRetry: (info) => {
          logRetry(info);
          hooks.onRetry?.(info);
        },
      },
      ...(hooks.onFeedResponse ? { onResponse: hooks.onFeedResponse } : {}),
      logger,
    });
}
