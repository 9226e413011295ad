import { maxBackoffMs } from '../config/backoff.js';
import { startWorkerHealth } from '../metrics/worker-health.js';
import { nextDueInMs, pullDueTimesIn } from '../store/lease-statements.js';
import { type RetentionLoop, startRetentionLoop } from '../store/retention-loop.js';
import { type FleetClaims, startFleetClaims } from './fleet-claims.js';
import { watchSources } from './scheduler.js';
import { logOutcome } from './turn-log.js';
import type { WorkerParts, WorkerResult } from './worker-parts.js';

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
 * A watch: /healthz, /readyz and /metrics on METRICS_PORT (unless serveMetrics is false), the fleet's claims, pruning
 * once every 5 minutes a replica, and the scheduler's loop until the signal aborts. Its turns
 * go to the metrics, the log and onOutcome; none is kept.
 */
export async function runWatchRound(w: WorkerParts): Promise<WorkerResult> {
  const { settings, log, logger, names } = w;
  const { lease } = settings;
  const { store, publisher } = w.parts;
  const health = w.serveMetrics
    ? await startWorkerHealth({
        ...settings.health,
        registry: w.metrics.registry,
        logger,
        store,
        publisher,
        lastBeat: w.lastBeat,
        stalledSource: w.stalledSource,
      })
    : null;
  log.info(
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
  // An application that embeds the loop goes on after a watch that failed to start:
  // nothing the watch started stays open.
  let claims: FleetClaims | undefined;
  let retention: RetentionLoop | undefined;
  try {
    const started = await startFleetClaims({
      store,
      sources: names,
      fromFile: settings.fromFile,
      lease,
      everyMs: settings.upkeepMs,
      logger,
    });
    claims = started;
    retention = startRetentionLoop({
      store,
      logger,
      days: settings.eventsRetentionDays,
      outboxHours: settings.outboxRetentionHours,
      intervalMs: WATCH_DEFAULTS.pruneEveryMs,
    });
    // Due times stored under a longer SYNC_INTERVAL_MS than this one's: the interval in force decides.
    await pullDueTimesIn(store, settings.intervalMs, maxBackoffMs(settings.intervalMs));
    // A source that a once run (or another worker) ran moments ago is due an interval after
    // that turn, and quiet turns log at debug: say why nothing happens meanwhile.
    const firstDueMs = await nextDueInMs(store, Number.MAX_SAFE_INTEGER);
    if (firstDueMs > 0) {
      log.info(
        { nextDueInMs: firstDueMs },
        `no source is due yet: the next is due in ${(firstDueMs / 1000).toFixed(1)} s, SYNC_INTERVAL_MS after ` +
          'its last turn (a once run counts); turns that find nothing new log at debug',
      );
    }
    await watchSources({
      concurrency: settings.concurrency,
      signal: w.signal,
      turn: w.turn,
      intervalMs: settings.intervalMs,
      describe: w.describe,
      accounts: w.accounts,
      claim: (limit) => started.claim(limit),
      logger,
      onBeat: w.beat,
      onOutcome: (outcome) => {
        w.observe(outcome);
        if (outcome.ok) logOutcome(log, outcome, outcome.result.stored > 0 ? 'info' : 'debug');
        else logOutcome(log, outcome, 'info');
        w.hooks.onOutcome?.(outcome);
      },
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
    registry: w.metrics.registry,
  };
}
