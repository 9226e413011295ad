import type { Registry } from 'prom-client';
import type { RetryDeps } from '../api/retry.js';
import type { GivenParts, Parts } from '../compose/parts.js';
import { planWorker, type SourcePlan, type WorkerPlan } from '../compose/plan-worker.js';
import { maxBackoffMs } from '../config/backoff.js';
import type { Config } from '../config/config-type.js';
import { ConfigError } from '../errors.js';
import type { FetchPage } from '../feed/feed-client.js';
import type { Logger } from '../logger.js';
import { dbGauges } from '../metrics/db-gauges.js';
import { createMetrics, type Metrics } from '../metrics/metrics.js';
import { startWorkerHealth } from '../metrics/worker-health.js';
import { scrubText } from '../scrub.js';
import { type Applier, createApplier } from '../store/applier.js';
import { takeLease } from '../store/lease.js';
import type { SourceLease } from '../store/lease-renewal.js';
import { ensureLeaseRows, leaseHolderOf, nextDueInMs, pullDueTimesIn } from '../store/lease-statements.js';
import { pruneRound, type RetentionLoop, startRetentionLoop } from '../store/retention-loop.js';
import { ByteBudget } from './byte-budget.js';
import type { CommitInfo } from './catch-up.js';
import { type FleetClaims, startFleetClaims } from './fleet-claims.js';
import { HELD_PAGES_DEFAULTS } from './held-pages.js';
import { AccountTurns, type Outcome, runEachOnce, turnFailed, watchSources } from './scheduler.js';
import {
  createSourceSync,
  outboxSettled,
  type RunResult,
  runFailed,
  type SourceSync,
  type SyncHooks,
} from './source-sync.js';

/**
 * What the caller sees of a worker's run as it goes; every one is optional. A source's
 * own hooks (SyncHooks) under the same names, with the source first.
 */
export interface WorkerHooks {
  /** A page of `source` committed (a progress display). */
  onCommit?: (source: string, info: CommitInfo) => void;
  /** A feed response of `source`, timed. */
  onFeedResponse?: (source: string, info: Parameters<NonNullable<SyncHooks['onFeedResponse']>>[0]) => void;
  /** A retry of a feed request of `source`, as its back-off starts. */
  onRetry?: (source: string, info: Parameters<NonNullable<SyncHooks['onRetry']>>[0]) => void;
  /** A turn of `source` began (true) or ended (false) under its lease. */
  onLeaseChange?: (source: string, held: boolean) => void;
  /** Jobs the relay published (it is shared by every source). */
  onPublished?: (queue: string, count: number) => void;
  /** One job's delay from its row's commit to its publication. */
  onPublishDelay?: (seconds: number) => void;
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

/** How a worker is built besides its plan: what its caller brings. */
export interface WorkerDeps {
  hooks?: WorkerHooks;
  describe?: (err: unknown) => string;
  /** WorkerOptions.serveMetrics. Default true. */
  serveMetrics?: boolean;
  /** Aborted on SIGTERM: the publisher stops reconnecting to a Redis that fails. */
  stopping?: AbortSignal;
  /** Parts the caller made: used as they are, and left to it to close. */
  given?: GivenParts;
  /** Replaces the feed fetcher (tests, benchmarks). */
  fetchPage?: FetchPage;
  /** The clock and sleep of the feed client's retries. */
  retryDeps?: RetryDeps;
}

/**
 * The main loop of feedsync, the same for `feedsync sync` and for an application that
 * embeds it: every source of the config (FEED_SOURCE, or each of FEED_SOURCES_FILE)
 * over one Postgres pool, one publisher and one outbox relay, at most SYNC_CONCURRENCY
 * turns at a time. `once` runs each source to its feed's end (or SYNC_ONCE_MAX_MS) and
 * hands the outbox over; `watch` claims due sources and serves /metrics until `signal`
 * aborts. It logs, calls its hooks and returns the outcomes; what the run means to a
 * terminal (stderr lines, an exit code, a Pushgateway) is its caller's.
 */
export async function runWorker(config: Config, opts: WorkerOptions): Promise<WorkerResult> {
  const plan = planWorker(config, { mode: opts.mode, migrate: opts.migrate === true, logger: opts.logger });
  const signal = opts.signal ?? new AbortController().signal;
  const worker = new Worker(plan, {
    ...(opts.hooks ? { hooks: opts.hooks } : {}),
    ...(opts.describe ? { describe: opts.describe } : {}),
    ...(opts.serveMetrics === undefined ? {} : { serveMetrics: opts.serveMetrics }),
    stopping: signal,
  });
  try {
    return opts.mode === 'watch' ? await worker.watch(signal) : await worker.runOnce(signal);
  } finally {
    await worker.close();
  }
}

/**
 * Whether a once run kept nothing back in the outbox: its final drain handed it over,
 * and each turn's was settled (outboxSettled).
 */
export function runDrained(run: Pick<WorkerResult, 'handedOver' | 'outcomes'>): boolean {
  return run.handedOver && run.outcomes.every((o) => !o.ok || outboxSettled(o.result));
}

/** The watch's own default. */
const WATCH_DEFAULTS = Object.freeze({
  /**
   * Milliseconds between prunes of old events and published outbox rows: once every 5
   * minutes a replica (as often as the CronJob's `sync --once` prunes), not once a turn.
   * Retention is counted in hours and days; pruning once a minute only added statements
   * to an idle deployment.
   */
  pruneEveryMs: 300_000,
});

/**
 * A worker: one Postgres pool, one publisher and one outbox relay shared by the turns; a
 * turn runs over them with a feed client of its own, closed at its end, so memory and
 * sockets follow SYNC_CONCURRENCY, not the number of sources. Built from its plan
 * (compose/plan-worker.ts), it never sees the Config. `runOnce` is a CronJob's run,
 * `watch` a Deployment's loop; `close` closes what it made.
 */
export class Worker {
  /** Made first: the relay and every turn count into them. */
  readonly metrics: Metrics;
  readonly parts: Parts;
  readonly #plan: WorkerPlan;
  readonly #logger: Logger;
  /** The worker's own lines. */
  readonly #log: Logger;
  readonly #hooks: WorkerHooks;
  readonly #deps: WorkerDeps;
  readonly #describe: (err: unknown) => string;
  readonly #inFlight = new TurnsInFlight();
  readonly #applier: Applier;
  /**
   * One budget of the feed's bytes for every lane: lanes of small pages read side by side,
   * and SYNC_CONCURRENCY lanes with pages near FEED_MAX_RESPONSE_BYTES hold at most the
   * budget and one answer together, not that many times it.
   */
  readonly #pageBudget = new ByteBudget(HELD_PAGES_DEFAULTS.maxHeldBytes);
  readonly #syncs = new Map<string, { plan: SourcePlan; sync: SourceSync }>();
  /** Turns in flight per account: a paced account runs one turn at a time here, and its other sources wait off the lanes. */
  readonly #accounts: AccountTurns;
  /** When the loop last showed it was alive (Date.now() milliseconds). */
  #lastBeat = Date.now();
  /** The schemas are checked by the first run that gets past them, not again by every run. */
  #checked = false;
  /** The counters' totals at the end of the last once run: a run's summary counts from them. */
  #counted: Readonly<Record<string, number | null>> = {};

  constructor(plan: WorkerPlan, deps: WorkerDeps = {}) {
    this.#plan = plan;
    this.#deps = deps;
    this.#logger = plan.logger;
    this.#log = plan.logger.child({ module: 'worker' });
    this.#hooks = deps.hooks ?? {};
    const { settings, names } = plan;
    const hooks = this.#hooks;
    this.parts = plan.parts(
      {
        ...(plan.poolMax === undefined ? {} : { poolMax: plan.poolMax }),
        ...(deps.stopping ? { stopping: deps.stopping } : {}),
        // Called once the relay publishes, by which time the metrics below exist.
        relay: {
          onPublished: (queue, count) => {
            this.metrics.onPublished(queue, count);
            hooks.onPublished?.(queue, count);
          },
          onPublishDelay: (seconds) => {
            this.metrics.onPublishDelay(seconds);
            hooks.onPublishDelay?.(seconds);
          },
          // A watch's turns leave the outbox to the relay: it reads it on this timer for rows
          // nobody offers (a failed publication, a worker that died), about once an interval.
          ...(plan.mode === 'watch' ? { sweepMs: settings.upkeepMs } : {}),
        },
      },
      deps.given,
    );
    // The metrics read their gauges from the parts' store; the relay, made on first use, counts into them.
    this.metrics = createMetrics(
      dbGauges(this.parts.store, names, settings.intervalMs),
      names,
      plan.budgetTally,
    );
    this.#applier = createApplier(this.parts.store, plan.route, { leaseMs: plan.applyLeaseMs });
    this.#accounts = new AccountTurns((source) => plan.accountOf(source));
    const line = deps.describe ?? ((err: unknown) => (err instanceof Error ? err.message : String(err)));
    // The lease row's line for a failure, scrubbed of the config's secrets and of addresses.
    this.#describe = (err) => scrubText(line(err), plan.secrets);
  }

  /** The runs of `source` over the shared parts, made once; its feed client lives for one turn. */
  syncOf(source: string): SourceSync {
    return this.#sourceOf(source).sync;
  }

  /**
   * A once run (a CronJob's): every source once, at most SYNC_CONCURRENCY at a time, each
   * under its lease whatever its due time; then the outbox handed over and pruned, once a
   * run, not once a source, and the run's summary line. Its own end, SYNC_ONCE_MAX_MS,
   * comes well inside a CronJob's activeDeadlineSeconds: the turns in flight commit what
   * they fetched, and the next run goes on from their cursors.
   */
  async runOnce(signal: AbortSignal): Promise<WorkerResult> {
    const { settings, names } = this.#plan;
    const limit = AbortSignal.timeout(settings.onceMaxMs);
    await this.#start();
    const { store } = this.parts;
    const started = performance.now();
    await ensureLeaseRows(store, names);
    // Who holds a source this run skipped, and until when: wait for it, rather than look for a second worker.
    const heldBy = new Map<string, Holder>();
    const turns = await runEachOnce({
      ...this.#turnOptions(),
      concurrency: settings.concurrency,
      signal,
      limit,
      sources: names,
      take: async (source) => {
        const taken = await takeLease(store, source, settings.lease);
        const holder = taken ? null : await leaseHolderOf(store, source);
        if (holder) heldBy.set(source, holder);
        return taken;
      },
      onOutcome: (outcome) => this.#ended(outcome, 'info', heldBy.get(outcome.source)),
    });
    this.#hooks.onTurnsDone?.();
    const { handedOver, handOverError } = await this.#handOver(signal);
    // The round's drain published every row the turns committed: a relay failure a turn saw
    // at its end (perhaps one left from before it began) kept no job back.
    const outcomes = handedOver && !signal.aborted ? turns.map(drainedTurn) : turns;
    const reached = new Set(outcomes.map((o) => o.source));
    const turnError = outcomes.find((o) => o.ok && o.result.drainError !== undefined);
    const result: WorkerResult = {
      outcomes,
      handedOver,
      handOverError:
        handOverError ?? (turnError?.ok ? turnError.result.drainError : this.parts.relay.lastError),
      // Stopped by its own limit, not by the signal: a source read short of its end, or not started.
      stoppedShort:
        outcomes.some((o) => o.ok && o.result.status === 'limit-reached') ||
        (limit.aborted && !signal.aborted && reached.size < names.length),
      registry: this.metrics.registry,
    };
    await this.#hooks.onRunEnd?.(result);
    for (const source of names) {
      if (!reached.has(source))
        this.#log.info({ source, outcome: 'not-started' }, 'source not started: stopping');
    }
    await this.#summarize(result, performance.now() - started);
    return result;
  }

  /**
   * A watch: /healthz, /readyz and /metrics on METRICS_PORT (unless serveMetrics is
   * false), the fleet's claims, pruning once every 5 minutes a replica, and the
   * scheduler's loop until the signal aborts. Its turns go to the metrics, the log and
   * onOutcome; none is kept. A watch that fails to start stops what it started.
   */
  async watch(signal: AbortSignal): Promise<WorkerResult> {
    await this.#start();
    const { settings, names } = this.#plan;
    const { lease } = settings;
    const { store, publisher } = this.parts;
    const health =
      this.#deps.serveMetrics === false
        ? null
        : await startWorkerHealth({
            ...settings.health,
            registry: this.metrics.registry,
            logger: this.#logger,
            store,
            publisher,
            lastBeat: () => this.#lastBeat,
            stalledSource: () => this.#inFlight.stalledSource(),
          });
    this.#log.info(
      {
        ...(health
          ? { host: settings.health.host, port: health.port }
          : { metrics: 'not served (serveMetrics: false)' }),
        intervalMs: settings.intervalMs,
        leaseMs: lease.leaseMs,
        sources: names.length,
        holder: lease.holder,
      },
      'watching the feeds',
    );
    let claims: FleetClaims | undefined;
    let retention: RetentionLoop | undefined;
    try {
      const started = await startFleetClaims({
        store,
        sources: names,
        fromFile: settings.fromFile,
        lease,
        everyMs: settings.upkeepMs,
        logger: this.#logger,
      });
      claims = started;
      retention = startRetentionLoop({
        store,
        logger: this.#logger,
        days: settings.eventsRetentionDays,
        outboxHours: settings.outboxRetentionHours,
        intervalMs: WATCH_DEFAULTS.pruneEveryMs,
      });
      await this.#tellFirstDue();
      await watchSources({
        ...this.#turnOptions(),
        concurrency: settings.concurrency,
        signal,
        claim: (limit) => started.claim(limit),
        logger: this.#logger,
        onBeat: () => this.#beat(),
        // Quiet turns log at debug.
        onOutcome: (outcome) =>
          this.#ended(outcome, outcome.ok && outcome.result.stored === 0 ? 'debug' : 'info'),
      });
    } finally {
      await claims?.stop();
      await retention?.stop();
      await health?.close();
    }
    return {
      outcomes: [],
      handedOver: true,
      handOverError: null,
      stoppedShort: false,
      registry: this.metrics.registry,
    };
  }

  /** Stops the relay, closes the publisher, then the store: only what the worker made. */
  async close(): Promise<void> {
    await this.parts.close();
  }

  /** A round's start: the schemas checked (on the first run only), the outbox's leftovers offered to the relay. */
  async #start(): Promise<void> {
    const { names, autoMigrate } = this.#plan;
    if (!this.#checked) {
      // Once, before any turn starts, so that two turns never migrate at the same time.
      if (names[0] !== undefined) await this.syncOf(names[0]).checkSchema();
      await this.parts.checkQueues({ migrate: autoMigrate });
      this.#checked = true;
    }
    // Rows an earlier run committed but did not publish: the relay reads them first.
    this.parts.relay.kick();
  }

  #turnOptions() {
    return {
      turn: (held: SourceLease, signal: AbortSignal, turnLimit?: AbortSignal) =>
        this.#turn(held, signal, turnLimit),
      intervalMs: this.#plan.settings.intervalMs,
      describe: this.#describe,
      accounts: this.#accounts,
    };
  }

  /** One turn of a source under its lease, counted in flight (its progress renews the lease). */
  async #turn(held: SourceLease, signal: AbortSignal, limit?: AbortSignal): Promise<RunResult> {
    const { plan, sync } = this.#sourceOf(held.source);
    // The source is named by whoever prints this: the stderr line's prefix, the log line's field, status's row.
    if (plan.keyProblem)
      throw new ConfigError(`${plan.keyProblem}; this source fails every turn until it is fixed`, 'KEY_FILE');
    return this.#inFlight.run(held, () => sync.runHeld(held, signal, limit));
  }

  /** A turn's end: counted in the metrics, logged, told to onOutcome. */
  #ended(outcome: Outcome, level: 'info' | 'debug', holder?: Holder): void {
    if (outcome.ok)
      this.metrics.observeRun(outcome.source, { ...outcome.result, failed: runFailed(outcome.result) });
    else this.metrics.observeFailure(outcome.source);
    logOutcome(this.#log, outcome, level, holder);
    this.#hooks.onOutcome?.(outcome);
  }

  /**
   * A once run's hand-over: rows an earlier run left unpublished are this run's to hand
   * over too, even when every source was leased elsewhere. A run stopped by the signal
   * leaves them to the next.
   */
  async #handOver(signal: AbortSignal): Promise<{ handedOver: boolean; handOverError: unknown }> {
    if (signal.aborted) return { handedOver: true, handOverError: null };
    const { settings } = this.#plan;
    try {
      await this.parts.relay.drain();
      await pruneRound({
        store: this.parts.store,
        logger: this.#logger,
        days: settings.eventsRetentionDays,
        outboxHours: settings.outboxRetentionHours,
        signal,
      });
      return { handedOver: true, handOverError: null };
    } catch (err) {
      // A configuration Redis refuses (a cluster, a prefix without a hash tag) is the
      // run's failure, not a Redis outage: exit 2 with the fix.
      if (err instanceof ConfigError) throw err;
      this.#log.error(
        { err },
        'the outbox could not be drained; the events are stored and the next run drains it',
      );
      return { handedOver: false, handOverError: err };
    }
  }

  /** A once run's summary line: its counters (counted from the last run's), its sources, and whether it drained. */
  async #summarize(result: WorkerResult, durationMs: number): Promise<void> {
    const { outcomes } = result;
    const only = this.#plan.settings.fromFile ? undefined : outcomes[0];
    const counts = await this.metrics.summary(this.#counted);
    this.#counted = Object.fromEntries(
      Object.entries(counts).map(([key, n]) => [key, (n ?? 0) + (this.#counted[key] ?? 0)]),
    );
    this.#log.info(
      {
        ...counts,
        ...tally(outcomes, this.#plan.names.length),
        ...(only?.ok ? { status: only.result.status, cursor: only.result.cursor } : {}),
        drained: runDrained(result),
        durationMs: Math.round(durationMs),
      },
      'sync run finished',
    );
  }

  /**
   * Due times stored under a longer SYNC_INTERVAL_MS than this one's: the interval in
   * force decides. A source that a once run (or another worker) ran moments ago is due
   * an interval after that turn, and quiet turns log at debug: say why nothing happens meanwhile.
   */
  async #tellFirstDue(): Promise<void> {
    const { store } = this.parts;
    const { intervalMs } = this.#plan.settings;
    await pullDueTimesIn(store, intervalMs, maxBackoffMs(intervalMs));
    const firstDueMs = await nextDueInMs(store, Number.MAX_SAFE_INTEGER);
    if (firstDueMs > 0) {
      this.#log.info(
        { nextDueInMs: firstDueMs },
        `no source is due yet: the next is due in ${(firstDueMs / 1000).toFixed(1)} s, SYNC_INTERVAL_MS after ` +
          'its last turn (a once run counts); turns that find nothing new log at debug',
      );
    }
  }

  #beat(): void {
    this.#lastBeat = Date.now();
  }

  /** A source's plan and runs, made on first use and kept: one applier and one page budget for all. */
  #sourceOf(source: string): { plan: SourcePlan; sync: SourceSync } {
    const known = this.#syncs.get(source);
    if (known) return known;
    const plan = this.#plan.source(source);
    const hooks = this.#turnHooks(source);
    const logger = this.#logger.child({ source });
    const fetchPage = this.#deps.fetchPage;
    const sync = createSourceSync({
      settings: plan.settings,
      store: this.parts.store,
      relay: this.parts.relay,
      applier: this.#applier,
      // A feed fetcher given by the caller, which closes it.
      openFeed: fetchPage
        ? () => ({ fetchPage, close: async () => {} })
        : plan.openFeed(logger, hooks, this.#deps.retryDeps),
      logger,
      hooks,
      autoMigrate: this.#plan.autoMigrate,
      pageBudget: this.#pageBudget,
    });
    const made = { plan, sync };
    this.#syncs.set(source, made);
    return made;
  }

  /**
   * A turn's hooks: the metrics' and the caller's, and the signs of progress that keep a
   * watch's liveness and stall checks quiet.
   */
  #turnHooks(source: string): SyncHooks {
    const counted = this.metrics.hooksFor(source);
    const hooks = this.#hooks;
    const inFlight = this.#inFlight;
    return {
      ...counted,
      onCommit: (info) => {
        counted.onCommit(info);
        hooks.onCommit?.(source, info);
        inFlight.progress(source);
        this.#beat();
      },
      onFeedResponse: (info) => {
        counted.onFeedResponse(info);
        hooks.onFeedResponse?.(source, info);
        inFlight.progress(source);
      },
      onRetry: (info) => {
        counted.onRetry();
        hooks.onRetry?.(source, info);
        inFlight.progress(source, info.waitMs);
        this.#beat();
      },
      onLeaseChange: (held) => {
        counted.onLeaseChange(held);
        hooks.onLeaseChange?.(source, held);
      },
    };
  }
}

/**
 * A worker's turns in flight, by source (one turn of a source at a time): their feed
 * responses, retries and commits are their progress, which keeps their leases renewed
 * (SourceLease.progress), and a turn with none for longer than its lease's stallMs is
 * what /healthz reports: the one owner of the stall rule.
 */
class TurnsInFlight {
  readonly #leases = new Map<string, SourceLease>();

  /** Runs `turn` under `lease`, counted as in flight until it ends. */
  async run<T>(lease: SourceLease, turn: () => Promise<T>): Promise<T> {
    this.#leases.set(lease.source, lease);
    try {
      return await turn();
    } finally {
      this.#leases.delete(lease.source);
    }
  }

  /** The turn of `source` moved on, or is about to wait `waitMs` on purpose (a retry's back-off). */
  progress(source: string, waitMs = 0): void {
    this.#leases.get(source)?.progress(waitMs);
  }

  /** A turn in flight that has shown no progress for longer than its lease's stallMs, or null. */
  stalledSource(): string | null {
    for (const [source, lease] of this.#leases) if (lease.stalled) return source;
    return null;
  }
}

/** A turn whose jobs the round's drain handed over: drained, whatever the relay said at its end. */
function drainedTurn(outcome: Outcome): Outcome {
  if (!outcome.ok || outboxSettled(outcome.result)) return outcome;
  const { drainError: _handedOver, ...result } = outcome.result;
  return { ...outcome, result: { ...result, drained: true } };
}

function tally(outcomes: readonly Outcome[], total: number): Record<string, number> {
  const count = (pick: (o: Outcome) => boolean): number => outcomes.filter(pick).length;
  return {
    sources: total,
    caught_up: count((o) => o.ok && o.result.status === 'caught-up' && o.result.drained),
    locked_elsewhere: count((o) => o.ok && o.result.status === 'held-elsewhere'),
    lease_lost: count((o) => o.ok && o.result.status === 'lease-lost'),
    not_caught_up: count((o) => o.ok && o.result.status === 'limit-reached'),
    failed: count(turnFailed),
    not_started: total - outcomes.length,
  };
}

/** Who holds a source's lease, and until when. */
export type Holder = NonNullable<Awaited<ReturnType<typeof leaseHolderOf>>>;

/** The summary line of one source's turn; `holder`, of a lease held elsewhere. */
export function logOutcome(log: Logger, outcome: Outcome, level: 'info' | 'debug', holder?: Holder): void {
  if (!outcome.ok) {
    const message = outcome.error instanceof Error ? outcome.error.message : String(outcome.error);
    log.error({ source: outcome.source, outcome: 'failed', err: outcome.error }, `source failed: ${message}`);
    return;
  }
  const r = outcome.result;
  const line = {
    source: outcome.source,
    outcome: r.status,
    // A turn does not drain the outbox (the worker does, after its turns): it can only
    // say that the relay failed while it ran. "drained" is said once, by the run's end.
    ...(outboxSettled(r) ? {} : { relayFailed: true }),
    stored: r.stored,
    duplicates: r.duplicates,
    quarantined: r.quarantined,
    pages: r.pages,
    cursor: r.cursor,
    durationMs: Math.round(r.durationMs),
  };
  if (r.status === 'held-elsewhere' && holder) {
    const until = holder.expiresAt.toISOString();
    log.info(
      { ...line, holder: holder.holder, leaseExpiresAt: until },
      `${holder.holder} holds the lease of this source until ${until} unless it renews it; skipped ` +
        '(a worker that was killed holds it until then: run again after that)',
    );
  } else if (r.status === 'held-elsewhere')
    log.info(line, 'another worker holds the lease of this source; skipped');
  else if (r.status === 'limit-reached')
    log.warn(
      line,
      'source not caught up: the run reached SYNC_ONCE_MAX_MS before the end of its feed; what it read is ' +
        'stored, and the next run goes on from its cursor',
    );
  else if (!outboxSettled(r)) log.warn(line, 'source stored its events; the outbox was not drained');
  else log[level](line, 'source finished');
}
