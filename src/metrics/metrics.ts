import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { BudgetTally } from '../budget/request-budgets.js';
import type { ApplyResult } from '../store/applier.js';
import { budgetMetrics } from './budget-metrics.js';
import { type FleetStates, fleetGauges } from './fleet-gauges.js';
import { publishMetrics } from './publish-metrics.js';
import { typeLabel } from './type-label.js';

/** Reads the gauges that come from the database, at scrape or summary time. */
export interface GaugeSource {
  /** Per source: seconds since its newest stored event's created_at, future dates left out (absent while nothing is stored). */
  cursorLagSeconds(): Promise<ReadonlyMap<string, number>>;
  outboxBacklog(): Promise<number>;
  /** Sources due for a whole interval that no worker claimed (the fleet's count, from the lease rows). */
  sourcesOverdue(): Promise<number>;
  /** Per source: when it last caught up (unix seconds), from its cursor row (absent before the first time). */
  lastSuccessSeconds(): Promise<ReadonlyMap<string, number>>;
  /** A fleet's sources by state, and the `k` worst of each list (fleet-gauges.ts). */
  fleetStates(k: number): Promise<FleetStates>;
}

/** A page committed, as the sync tells it (its onCommit hook). */
export interface CommitCounts {
  pages: number;
  result: Pick<ApplyResult, 'inserted' | 'duplicates' | 'quarantined' | 'conflicts' | 'contactsWithoutEmail'>;
}

/** The hooks of one source's runs; the sync's SyncHooks take them as they are. */
export interface SourceHooks {
  onCommit(info: CommitCounts): void;
  onFeedResponse(info: { status: number; seconds: number }): void;
  onRetry(): void;
  onPublished(queue: string, count: number): void;
  onPublishDelay(seconds: number): void;
  onLeaseChange(held: boolean): void;
}

/** A run of a source that returned: how it ended, and whether it failed (`runFailed`). */
export interface RunObservation {
  status: string;
  durationMs: number;
  failed: boolean;
}

export interface Metrics {
  readonly registry: Registry;
  /** Hooks to pass to the sync of `source`. */
  hooksFor(source: string): SourceHooks;
  /** Counts jobs handed to BullMQ (the relay is shared by every source). */
  onPublished(queue: string, count: number): void;
  /** One job's delay from commit to publication. */
  onPublishDelay(seconds: number): void;
  /** Times a run of `source` that returned, and counts it as failed when it is (outbox not drained). */
  observeRun(source: string, run: RunObservation): void;
  /** Counts a run of `source` that threw. */
  observeFailure(source: string): void;
  /**
   * A short summary for the end of a once run; its counters counted from `since` (an
   * earlier summary of the same metrics: a worker that runs once again and again).
   */
  summary(since?: Readonly<Record<string, number | null>>): Promise<Record<string, number | null>>;
}

/**
 * The Prometheus metrics of the sync worker (names in docs/DEPLOYMENT.md); `sources`
 * are those this process syncs.
 *
 * One source: what belongs to it carries a `source` label, every series from the start.
 * A fleet (more than one source) has as many series at 100,000 sources as at two: the
 * counters and histograms are totals without a `source` label, and the per-source
 * gauges an alert names a source by are kept for the worst sources only, read from
 * Postgres at scrape time (fleet-gauges.ts), beside the counts of sources by state.
 * One shape for every fleet, whatever its size: its dashboards and alerts do not change
 * when it grows.
 */
export function createMetrics(
  gauges: GaugeSource,
  sources: readonly string[],
  /** The process's request budgets, for their waits and 429s. Default: none counted. */
  budget: BudgetTally = { waitSeconds: 0, rateLimited: 0 },
): Metrics {
  const registry = new Registry();
  budgetMetrics(registry, budget);
  const fleet = sources.length > 1;
  /** The `source` label, where series are per source: one source only. */
  const bySource = fleet ? [] : ['source'];
  const labelsOf = (source: string): Record<string, string> => (fleet ? {} : { source });
  const commits = commitMetrics(registry, bySource);
  const feed = feedMetrics(registry, bySource);
  const { onPublished, onPublishDelay } = publishMetrics(registry);
  const runs = runMetrics(registry, bySource);
  // A fleet's failures in a row come from the lease rows (fleet-gauges.ts): every replica's turns.
  const consecutiveFailures = fleet ? null : singleSourceGauges(registry, gauges);
  if (fleet) fleetGauges(registry, (k) => gauges.fleetStates(k));
  const failed = (source: string): void => {
    runs.failures.inc(labelsOf(source));
    consecutiveFailures?.inc({ source });
  };
  // Every series exists from the start at 0: increase() cannot see a series born at 1, so
  // the first quarantined item or failed run would go unseen by the alerts. A fleet's
  // totals have no labels, and prom-client shows those at 0 by itself.
  if (!fleet) {
    for (const source of sources) {
      runs.held.set({ source }, 0);
      consecutiveFailures?.set({ source }, 0);
      runs.duration.zero({ source });
      for (const counter of [...commits.perSource, feed.retries, runs.failures, runs.leaseLost]) {
        counter.inc({ source }, 0);
      }
    }
  }
  backlogGauges(registry, gauges);

  const hooksFor = (source: string): SourceHooks => {
    const labels = labelsOf(source);
    return {
      onCommit: (info) => commits.count(labels, info),
      onFeedResponse: ({ status, seconds }) =>
        feed.requests.observe({ ...labels, status: statusClass(status) }, seconds),
      onRetry: () => feed.retries.inc(labels),
      onPublished,
      onPublishDelay,
      // A fleet shows the sources held now only (at most SYNC_CONCURRENCY), never every one it held.
      onLeaseChange: (isHeld) => {
        if (isHeld) runs.held.set({ source }, 1);
        else if (fleet) runs.held.remove({ source });
        else runs.held.set({ source }, 0);
      },
    };
  };

  return {
    registry,
    hooksFor,
    onPublished,
    onPublishDelay,
    observeRun(source, run) {
      runs.duration.observe(labelsOf(source), run.durationMs / 1000);
      if (run.status === 'lease-lost') runs.leaseLost.inc(labelsOf(source));
      if (run.failed) failed(source);
      // A run stopped by SIGTERM, or one that found or lost the lease to another worker, says nothing about the feed.
      else if (run.status !== 'stopped' && run.status !== 'held-elsewhere' && run.status !== 'lease-lost')
        consecutiveFailures?.set({ source }, 0);
    },
    observeFailure: failed,
    summary: (since) => summarize(registry, gauges, fleet, since),
  };
}

/** What the committed pages held: events stored, repeated, set aside, and the pages themselves. */
interface CommitMetrics {
  /** The counters that start at 0 for each source, where series are per source. */
  perSource: Counter[];
  count(labels: Record<string, string>, info: CommitCounts): void;
}

function commitMetrics(registry: Registry, bySource: string[]): CommitMetrics {
  const stored = new Counter({
    name: 'feedsync_events_stored_total',
    help: 'Events stored for the first time, by source and type (a type this release does not know: "other").',
    labelNames: [...bySource, 'type'],
    registers: [registry],
  });
  const duplicates = new Counter({
    name: 'feedsync_events_duplicate_total',
    help: 'Events that were already stored (overlap, repeats, webhook and feed both).',
    labelNames: bySource,
    registers: [registry],
  });
  const quarantined = new Counter({
    name: 'feedsync_events_quarantined_total',
    help: 'Items kept in the quarantine table because they are not storable events.',
    labelNames: bySource,
    registers: [registry],
  });
  const conflicts = new Counter({
    name: 'feedsync_events_conflict_total',
    help: 'Versions of stored event ids that came back with other content (the first kept; the newest other one in the conflicts table).',
    labelNames: bySource,
    registers: [registry],
  });
  // One series for every source: rare, and the log of the receiver or the status of the
  // events table tells which; a source label would add a series per source for it.
  const contactsWithoutEmail = new Counter({
    name: 'feedsync_contact_events_without_email_total',
    help: 'contact.* events stored and enqueued without a data.email to key contact_status and suppressions by (they update neither).',
    registers: [registry],
  });
  const pages = new Counter({
    name: 'feedsync_pages_total',
    help: 'Feed pages committed.',
    labelNames: bySource,
    registers: [registry],
  });
  return {
    perSource: [duplicates, quarantined, conflicts, pages],
    count(labels, info) {
      pages.inc(labels, info.pages);
      for (const e of info.result.inserted) stored.inc({ ...labels, type: typeLabel(e.type) });
      if (info.result.duplicates > 0) duplicates.inc(labels, info.result.duplicates);
      if (info.result.quarantined > 0) quarantined.inc(labels, info.result.quarantined);
      if (info.result.conflicts > 0) conflicts.inc(labels, info.result.conflicts);
      if (info.result.contactsWithoutEmail > 0) contactsWithoutEmail.inc(info.result.contactsWithoutEmail);
    },
  };
}

/** The feed's requests: how long each took, by status class, and how many were retried. */
function feedMetrics(registry: Registry, bySource: string[]): { requests: Histogram; retries: Counter } {
  const requests = new Histogram({
    name: 'feedsync_feed_request_duration_seconds',
    help: 'Feed request latency, by source and HTTP status class (1xx–5xx, with 401, 403 and 429 apart; 0: no answer; other: not HTTP).',
    labelNames: [...bySource, 'status'],
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const retries = new Counter({
    name: 'feedsync_feed_retries_total',
    help: 'Feed requests retried.',
    labelNames: bySource,
    registers: [registry],
  });
  return { requests, retries };
}

/** The runs of a source and its lease: their durations, failures, leases lost and held. */
interface RunMetrics {
  duration: Histogram;
  failures: Counter;
  leaseLost: Counter;
  held: Gauge;
}

function runMetrics(registry: Registry, bySource: string[]): RunMetrics {
  return {
    duration: new Histogram({
      name: 'feedsync_run_duration_seconds',
      help: 'Duration of sync runs, by source.',
      labelNames: bySource,
      buckets: [0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600],
      registers: [registry],
    }),
    failures: new Counter({
      name: 'feedsync_run_failures_total',
      help: 'Runs that failed (threw, or could not drain the outbox), by source.',
      labelNames: bySource,
      registers: [registry],
    }),
    leaseLost: new Counter({
      name: 'feedsync_lease_lost_total',
      help: 'Turns of the source stopped because this process lost its lease (frozen or cut off past SOURCE_LEASE_MS); nothing more of them was committed.',
      labelNames: bySource,
      registers: [registry],
    }),
    held: new Gauge({
      name: 'feedsync_source_held',
      help: "1 while this process holds the source's lease (a turn of it is in flight here).",
      labelNames: ['source'],
      registers: [registry],
    }),
  };
}

/** The gauges of work not done yet, read from Postgres at scrape time (NaN while it does not answer). */
function backlogGauges(registry: Registry, gauges: GaugeSource): void {
  new Gauge({
    name: 'feedsync_outbox_backlog',
    help: 'Outbox rows not yet published to BullMQ.',
    registers: [registry],
    async collect() {
      this.set(await gauges.outboxBacklog().catch(() => Number.NaN));
    },
  });

  new Gauge({
    name: 'feedsync_sources_overdue',
    help: 'Sources due for a whole SYNC_INTERVAL_MS that no worker has claimed (all workers alike: read from the lease rows).',
    registers: [registry],
    async collect() {
      this.set(await gauges.sourcesOverdue().catch(() => Number.NaN));
    },
  });
}

/** Metrics.summary: the counters' totals, the backlog and the worst lag (null where Postgres did not answer). */
async function summarize(
  registry: Registry,
  gauges: GaugeSource,
  fleet: boolean,
  since: Readonly<Record<string, number | null>> = {},
): Promise<Record<string, number | null>> {
  const sum = async (name: string): Promise<number> => {
    const metric = await registry.getSingleMetric(name)?.get();
    // Counters only: every value is a sample of the total, one per label set.
    const total = (metric?.values ?? []).reduce((acc, v) => acc + v.value, 0);
    const key = name.replace(/^feedsync_/, '').replace(/_total$/, '');
    return total - (since[key] ?? 0);
  };
  const lags = fleet
    ? gauges.fleetStates(1).then((s) => s.worst.flatMap((w) => (w.lagSeconds === null ? [] : [w.lagSeconds])))
    : gauges.cursorLagSeconds().then((lags) => [...lags.values()]);
  return {
    events_stored: await sum('feedsync_events_stored_total'),
    events_duplicate: await sum('feedsync_events_duplicate_total'),
    events_quarantined: await sum('feedsync_events_quarantined_total'),
    events_conflict: await sum('feedsync_events_conflict_total'),
    contact_events_without_email: await sum('feedsync_contact_events_without_email_total'),
    pages: await sum('feedsync_pages_total'),
    feed_retries: await sum('feedsync_feed_retries_total'),
    jobs_published: await sum('feedsync_jobs_published_total'),
    outbox_backlog: await gauges.outboxBacklog().catch(() => null),
    cursor_lag_seconds: await lags.then((l) => (l.length === 0 ? null : Math.max(...l))).catch(() => null),
  };
}

/**
 * One source's gauges: its last success and lag read from Postgres at scrape time, and
 * its failures in a row counted here (returned, for the runs to count into).
 */
function singleSourceGauges(registry: Registry, gauges: GaugeSource): Gauge {
  // Read from the cursor row, so a restarted worker or a failed once run still reports the true time.
  new Gauge({
    name: 'feedsync_last_success_timestamp_seconds',
    help: 'When a run of the source last caught up with the feed (unix seconds).',
    labelNames: ['source'],
    registers: [registry],
    async collect() {
      const at = await gauges.lastSuccessSeconds().catch(() => null);
      for (const [source, seconds] of at ?? []) this.set({ source }, seconds);
    },
  });
  new Gauge({
    name: 'feedsync_cursor_lag_seconds',
    help: "Now minus the newest stored event's created_at (events dated in the future left out), by source.",
    labelNames: ['source'],
    registers: [registry],
    async collect() {
      const lag = await gauges.cursorLagSeconds().catch(() => null);
      for (const [source, seconds] of lag ?? []) this.set({ source }, seconds);
    },
  });
  // The probes stay green through a feed outage (docs/DEPLOYMENT.md, Probes): this says how long it lasts.
  return new Gauge({
    name: 'feedsync_run_consecutive_failures',
    help: 'Runs of the source that failed in a row; 0 after a run that did not fail.',
    labelNames: ['source'],
    registers: [registry],
  });
}

/**
 * The status label of a feed request: a closed set, so whatever the feed answers adds
 * at most ten series a source. 401 and 403 stay apart for the key alert, 429 for the
 * rate limit; a status outside 100–599 is not HTTP at all.
 */
function statusClass(status: number): string {
  if (status === 0) return '0';
  if (status === 401 || status === 403 || status === 429) return String(status);
  if (status >= 100 && status <= 599) return `${Math.floor(status / 100)}xx`;
  return 'other';
}
