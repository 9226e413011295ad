import type { Registry } from 'prom-client';
import type { RetryDeps } from '../api/retry.js';
import { accountOf } from '../budget/request-budgets.js';
import { budgetsFor, composeParts, type GivenParts, type Parts } from '../compose/parts.js';
import type { Config } from '../config/config-type.js';
import { secretsOf } from '../config/secrets.js';
import { configForSource } from '../config/source-config.js';
import { ConfigError } from '../errors.js';
import type { FetchPage } from '../feed/feed-client.js';
import type { Logger } from '../logger.js';
import { dbGauges } from '../metrics/db-gauges.js';
import { createMetrics, type Metrics } from '../metrics/metrics.js';
import { scrubText } from '../scrub.js';
import { AccountTurns } from './account-turns.js';
import { ByteBudget } from './byte-budget.js';
import type { CommitInfo } from './catch-up.js';
import { HELD_PAGES_DEFAULTS } from './held-pages.js';
import { type RoundSettings, roundSettings } from './round-settings.js';
import type { Outcome, Turn } from './scheduler.js';
import { applierFor, feedOf, sourceSettings } from './source-parts.js';
import { createSourceSync, runFailed, type SourceSync, type SyncHooks } from './source-sync.js';
import { TurnsInFlight } from './turns-in-flight.js';

/** What the caller sees of a worker's run as it goes; every one is optional. */
export interface WorkerHooks {
  /** A page of `source` committed (a progress display). */
  onCommit?: (source: string, info: CommitInfo) => void;
  /** A turn of a source ended, in either mode. */
  onOutcome?: (outcome: Outcome) => void;
  /** A once run's turns are over; the outbox's hand-over and pruning follow. */
  onTurnsDone?: () => void;
  /**
   * A once run's end, before its summary line and while its parts are open: the
   * registry's gauges read Postgres, so a push to a Pushgateway goes here.
   */
  onRunEnd?: (result: WorkerResult) => Promise<void> | void;
}

export interface WorkerOptions {
  /** 'once': every source once, to its feed's end (a CronJob run); 'watch': until `signal` aborts. */
  mode: 'once' | 'watch';
  /** Apply pending migrations instead of refusing to run (`sync --migrate`). */
  migrate?: boolean;
  /**
   * Aborted on shutdown: turns in flight stop at their next commit, no new one starts,
   * and runWorker returns once they have. Without it a watch runs as long as the process.
   */
  signal?: AbortSignal;
  /** Default: a logger at the config's LOG_LEVEL that scrubs its secrets (`loggerFor(config)`). */
  logger?: Logger;
  hooks?: WorkerHooks;
  /**
   * A failure as one line, kept in the lease row for `status`. Default its message. What it
   * returns is scrubbed (scrubText) before it is stored: the service may echo the key or an address.
   */
  describe?: (err: unknown) => string;
  /**
   * A watch serves /healthz, /readyz and /metrics on METRICS_PORT (METRICS_HOST, every
   * interface by default). False for an application that serves its own, or none: no
   * port is opened, and the metrics are still kept (`registry` of the result). Default true.
   */
  serveMetrics?: boolean;
}

export interface WorkerResult {
  /** Each source's turn of a once run, in the order they ended; a watch keeps none (see onOutcome). */
  readonly outcomes: readonly Outcome[];
  /** False when a once run's final drain of the outbox failed: the events are stored, the next run hands them over. */
  readonly handedOver: boolean;
  /** What last kept the outbox back (the final drain, a turn's drain, the relay), if anything did. */
  readonly handOverError: unknown;
  /** A once run stopped at SYNC_ONCE_MAX_MS (not by `signal`) with a source short of its feed's end or not started. */
  readonly stoppedShort: boolean;
  /** The worker's metrics (names in docs/DEPLOYMENT.md). */
  readonly registry: Registry;
}

/** What an application that runs one source itself (`createSync`) brings to a worker. */
export interface EmbeddedParts {
  /** Parts it made: used as they are, and left to it to close. */
  given?: GivenParts;
  /** The sources to run. Default: every source of the config. */
  sources?: readonly string[];
  /** Its hooks, called after the worker's own. */
  hooks?: SyncHooks;
  /** Replaces the feed fetcher (tests, benchmarks). */
  fetchPage?: FetchPage;
  /** The clock and sleep of the feed client's retries. */
  retryDeps?: RetryDeps;
}

/** The shared parts of one worker run and its turns, for the once and the watch rounds. */
export interface WorkerParts {
  /** What the rounds read of the configuration; the Config itself stays in workerParts. */
  readonly settings: RoundSettings;
  readonly logger: Logger;
  /** The worker's own lines. */
  readonly log: Logger;
  readonly parts: Parts;
  readonly metrics: Metrics;
  readonly names: readonly string[];
  readonly signal: AbortSignal;
  /** A once run's SYNC_ONCE_MAX_MS; none for a watch. */
  readonly limit: AbortSignal | undefined;
  readonly hooks: WorkerHooks;
  readonly describe: (err: unknown) => string;
  /** WorkerOptions.serveMetrics: whether a watch opens METRICS_PORT. */
  readonly serveMetrics: boolean;
  /** The runs of one source over the shared parts; its feed client lives for one turn. */
  syncOf(source: string): SourceSync;
  turn: Turn;
  /** Counts a turn's outcome in the metrics. */
  observe(outcome: Outcome): void;
  /** When the loop last showed it was alive (Date.now() milliseconds), and a beat. */
  lastBeat(): number;
  beat(): void;
  /** A turn in flight that has shown no progress for longer than its lease's stallMs, or null. */
  stalledSource(): string | null;
  /** Turns in flight per account: a paced account runs one turn at a time here, and its other sources wait off the lanes. */
  accounts: AccountTurns;
}

/**
 * One Postgres pool, one publisher and one outbox relay shared by the turns; a turn
 * runs over them with a feed client of its own, closed at its end, so memory and
 * sockets follow SYNC_CONCURRENCY, not the number of sources. The composition of a
 * worker: the one place below the command that reads the `Config`.
 */
export function workerParts(
  config: Config,
  logger: Logger,
  opts: Omit<WorkerOptions, 'logger'> & { signal: AbortSignal },
  embedded: EmbeddedParts = {},
): WorkerParts {
  const settings = roundSettings(config, opts.mode);
  const hooks = opts.hooks ?? {};
  const names = embedded.sources ?? config.sources.map((s) => s.source);
  const parts = composeParts(
    config,
    logger,
    {
      // Per turn in flight, one connection for its commits; then the relay's, and one for
      // claims, renewals, gauges and the schema check. No connection holds a source.
      poolMax: settings.concurrency + 2,
      stopping: opts.signal,
      // Called once the relay publishes, by which time the metrics below exist.
      relay: {
        onPublished: (queue, count) => metrics.onPublished(queue, count),
        onPublishDelay: (seconds) => metrics.onPublishDelay(seconds),
        // A watch's turns leave the outbox to the relay: it reads it on this timer for rows
        // nobody offers (a failed publication, a worker that died), about once an interval.
        ...(opts.mode === 'watch' ? { sweepMs: settings.upkeepMs } : {}),
      },
    },
    embedded.given,
  );
  // The metrics read their gauges from the parts' store; the relay, made on first use, counts into them.
  const metrics = createMetrics(
    dbGauges(parts.store, names, settings.intervalMs),
    names,
    budgetsFor(config).tally,
  );
  let lastBeat = Date.now();
  const beat = (): void => {
    lastBeat = Date.now();
  };
  const inFlight = new TurnsInFlight();
  // A once run's own end, well inside a CronJob's activeDeadlineSeconds: the turns in
  // flight commit what they fetched, and the next run goes on from their cursors.
  const limit = opts.mode === 'watch' ? undefined : AbortSignal.timeout(config.syncOnceMaxMs);
  const keyProblems = new Map(
    config.sources.flatMap((s) => (s.keyProblem ? [[s.source, s.keyProblem]] : [])),
  );
  const syncOf = sourceSyncs(config, logger, parts, {
    embedded,
    autoMigrate: opts.migrate === true,
    hooksFor: (source) =>
      turnHooks(source, { counted: metrics.hooksFor(source), hooks, embedded, inFlight, beat }),
  });
  return {
    settings,
    logger,
    log: logger.child({ module: 'worker' }),
    parts,
    metrics,
    names,
    signal: opts.signal,
    limit,
    hooks,
    describe: scrubbed(config, opts.describe),
    serveMetrics: opts.serveMetrics ?? true,
    syncOf,
    turn: async (held, signal, turnLimit) => {
      const problem = keyProblems.get(held.source);
      // The source is named by whoever prints this: the stderr line's prefix, the log line's field, status's row.
      if (problem)
        throw new ConfigError(`${problem}; this source fails every turn until it is fixed`, 'KEY_FILE');
      return inFlight.run(held, () => syncOf(held.source).runHeld(held, signal, turnLimit));
    },
    observe: (outcome) => {
      if (outcome.ok)
        metrics.observeRun(outcome.source, { ...outcome.result, failed: runFailed(outcome.result) });
      else metrics.observeFailure(outcome.source);
    },
    lastBeat: () => lastBeat,
    beat,
    stalledSource: () => inFlight.stalledSource(),
    accounts: accountTurns(config, logger),
  };
}

/**
 * The runs of each source over the worker's parts: its own settings and feed from the
 * config (`configForSource`), one applier and one budget of the feed's bytes for all.
 */
function sourceSyncs(
  config: Config,
  logger: Logger,
  parts: Parts,
  opts: { embedded: EmbeddedParts; autoMigrate: boolean; hooksFor: (source: string) => SyncHooks },
): (source: string) => SourceSync {
  const { embedded } = opts;
  const applier = applierFor(config, parts.store);
  // One budget of the feed's bytes for every lane: lanes of small pages read side by side,
  // and SYNC_CONCURRENCY lanes with pages near FEED_MAX_RESPONSE_BYTES hold at most the
  // budget and one answer together, not that many times it.
  const pageBudget = new ByteBudget(HELD_PAGES_DEFAULTS.maxHeldBytes);
  return (source) => {
    const own = configForSource(config, source);
    const hooks = opts.hooksFor(source);
    const log = logger.child({ source });
    return createSourceSync({
      settings: sourceSettings(own),
      store: parts.store,
      relay: parts.relay,
      applier,
      openFeed: embedded.fetchPage
        ? fixedFeed(embedded.fetchPage)
        : feedOf(own, log, hooks, embedded.retryDeps),
      logger: log,
      hooks,
      autoMigrate: opts.autoMigrate,
      pageBudget,
    });
  };
}

/**
 * A turn's hooks: the metrics', the caller's and an embedding's, and the signs of
 * progress that keep a watch's liveness and stall checks quiet.
 */
function turnHooks(
  source: string,
  to: {
    counted: ReturnType<Metrics['hooksFor']>;
    hooks: WorkerHooks;
    embedded: EmbeddedParts;
    inFlight: TurnsInFlight;
    beat: () => void;
  },
): SyncHooks {
  const { counted, hooks, inFlight, beat } = to;
  const theirs = to.embedded.hooks ?? {};
  return {
    ...counted,
    onCommit: (info) => {
      hooks.onCommit?.(source, info);
      counted.onCommit(info);
      theirs.onCommit?.(info);
      inFlight.progress(source);
      beat();
    },
    onFeedResponse: (info) => {
      counted.onFeedResponse(info);
      theirs.onFeedResponse?.(info);
      inFlight.progress(source);
    },
    onRetry: (info) => {
      counted.onRetry();
      theirs.onRetry?.(info);
      inFlight.progress(source, info.waitMs);
      beat();
    },
    onLeaseChange: (held) => {
      counted.onLeaseChange(held);
      theirs.onLeaseChange?.(held);
    },
  };
}

/** A feed fetcher given by the caller, which closes it. */
function fixedFeed(fetchPage: FetchPage): () => { fetchPage: FetchPage; close(): Promise<void> } {
  return () => ({ fetchPage, close: async () => {} });
}

/** The lease row's line for a failure, scrubbed of the config's secrets and of addresses. */
function scrubbed(config: Config, describe?: (err: unknown) => string): (err: unknown) => string {
  const secrets = secretsOf(config);
  const line = describe ?? ((err: unknown) => (err instanceof Error ? err.message : String(err)));
  return (err) => scrubText(line(err), secrets);
}

/**
 * The account of each source (a hash of its key) and whether its request budget paces it
 * now, from the source's entry as configForSource reads it (its key and limits, else the
 * variables'), found by name in a map made once: the scheduler asks for every source it
 * passes over.
 */
function accountTurns(config: Config, logger: Logger): AccountTurns {
  const budgets = budgetsFor(config, logger);
  const entries = new Map(config.sources.map((s) => [s.source, s]));
  return new AccountTurns((source) => {
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
  });
}
