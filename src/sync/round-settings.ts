import { leaseOptionsFor } from '../compose/parts.js';
import { maxBackoffMs } from '../config/backoff.js';
import type { Config } from '../config/config-type.js';
import type { LeaseOptions } from '../store/lease-renewal.js';

/**
 * What the once and the watch rounds read of the configuration. workerParts reads the
 * `Config` once into these; the rounds, like every module below the composition, get
 * the values they use and never the `Config`.
 */
export interface RoundSettings {
  /** SYNC_CONCURRENCY: turns at a time. */
  readonly concurrency: number;
  /** SYNC_INTERVAL_MS: the pause between a source's turns. */
  readonly intervalMs: number;
  /** Who holds the leases this worker takes, for SOURCE_LEASE_MS; a watch's turns also for how long they may stall. */
  readonly lease: LeaseOptions;
  /** The per-worker rounds of a watch (lease rows, the outbox's sweep): once two intervals, between 1 and 60 s. */
  readonly upkeepMs: number;
  /** Whether the sources come from FEED_SOURCES_FILE: the summary of a once run then names no single source. */
  readonly fromFile: boolean;
  /** EVENTS_RETENTION_DAYS (null: events are kept) and OUTBOX_RETENTION_HOURS: what the rounds prune. */
  readonly eventsRetentionDays: number | null;
  readonly outboxRetentionHours: number;
  /** A watch's /healthz, /readyz and /metrics: METRICS_PORT, METRICS_HOST, and when its loop is stale (ms). */
  readonly health: { readonly port: number; readonly host: string; readonly staleAfterMs: number };
}

export function roundSettings(config: Config, mode: 'once' | 'watch'): RoundSettings {
  const lease = leaseOptionsFor(config);
  return {
    concurrency: config.syncConcurrency,
    intervalMs: config.syncIntervalMs,
    // Between two signs of progress a watch's turn waits for one statement (under the
    // lease) and for feed requests: its own, and, with pages near the response limit,
    // those of the lanes ahead of it in line for the shared budget of the feed's bytes,
    // one a lane (FEED_TIMEOUT_MS each). A
    // retry's back-off is announced as it starts. A once run's turns need no such watch:
    // SYNC_ONCE_MAX_MS ends them all.
    lease:
      mode === 'watch'
        ? { ...lease, stallMs: config.sourceLeaseMs + config.syncConcurrency * config.feed.timeoutMs }
        : lease,
    // Twice an interval, not once: at the default 30 s the sweep (four statements) and the
    // lease rows' upkeep (one) ran twice a minute on an idle replica, a third of what a
    // caught-up deployment cost its Postgres; a minute is still far under the relay's own
    // default sweep and under any alert (docs/BENCHMARKS.md, idle).
    upkeepMs: Math.min(60_000, Math.max(1_000, 2 * config.syncIntervalMs)),
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
