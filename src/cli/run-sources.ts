import { type Config, configForSource } from '../config.js';
import { exitCodeOf } from '../errors.js';
import type { Logger } from '../logger.js';
import { dbGauges } from '../metrics/db-gauges.js';
import { createMetrics } from '../metrics/metrics.js';
import { pushMetrics } from '../metrics/push.js';
import { startWorkerHealth } from '../metrics/worker-health.js';
import { createPublisher } from '../queue/publisher.js';
import { startRelay } from '../queue/relay.js';
import { jobOptionsFor } from '../queue/routes.js';
import { createStore } from '../store/db.js';
import { type Outcome, rotate, runEachOnce, startIndex, watchSources } from '../sync/scheduler.js';
import { shutdownSignal } from '../sync/signals.js';
import { createSync, runFailed } from '../sync/sync.js';

/**
 * `feedsync sync` with FEED_SOURCES_FILE: one Postgres pool, one publisher and one
 * outbox relay shared by a one-source run per source, which the scheduler runs at most
 * SYNC_CONCURRENCY at a time. Returns the exit code.
 */
export async function runSources(
  config: Config,
  logger: Logger,
  opts: { watch: boolean; migrate: boolean },
): Promise<number> {
  const log = logger.child({ module: 'cli' });
  const shutdown = shutdownSignal(logger);
  const names = config.sources.map((s) => s.source);
  // Per source in flight: the connection that holds its lock, and one for its commit;
  // then the relay's and one for the gauges and the schema check.
  const store = createStore({
    ...config.database,
    logger,
    max: 2 * config.syncConcurrency + 2,
    applicationName: config.hostName,
  });
  const publisher = createPublisher({
    redis: config.redis,
    prefix: config.queues.prefix,
    jobOptions: jobOptionsFor(config.queues),
  });
  const metrics = createMetrics(dbGauges(store, names), names);
  const relay = startRelay({ store, publisher, logger, onPublished: metrics.onPublished });
  let lastBeat = Date.now();
  const beat = (): void => {
    lastBeat = Date.now();
  };
  // Each replica starts at its own point of the list, so that replicas spread over the sources.
  const order = rotate(names, startIndex(`${config.hostName}/${process.pid}`, names.length));
  const syncs = order.map((source) => {
    const hooks = metrics.hooksFor(source);
    return createSync(configForSource(config, source), {
      logger: logger.child({ source }),
      store,
      publisher,
      relay,
      autoMigrate: opts.migrate,
      hooks: {
        ...hooks,
        onCommit: (info) => {
          hooks.onCommit(info);
          beat();
        },
        onRetry: (info) => {
          hooks.onRetry(info);
          beat();
        },
      },
    });
  });
  const runners = syncs.map((sync, i) => ({ source: order[i]!, runOnce: sync.runOnce }));
  const observe = (outcome: Outcome): void => {
    if (outcome.ok) metrics.observeRun(outcome.source, outcome.result);
    else metrics.observeFailure(outcome.source);
  };

  try {
    // Once, before any lane starts, so that two runs never migrate at the same time.
    await syncs[0]!.checkSchema();
    const lanes = { runners, concurrency: config.syncConcurrency, signal: shutdown.signal };
    if (!opts.watch) {
      const started = performance.now();
      const outcomes = await runEachOnce({
        ...lanes,
        onOutcome: (outcome) => {
          observe(outcome);
          logOutcome(log, outcome, 'info');
        },
      });
      // One group for the whole set: every once run pushes every source it was given.
      if (config.pushgatewayUrl) await pushMetrics(config.pushgatewayUrl, metrics.registry, {}, log);
      const reached = new Set(outcomes.map((o) => o.source));
      for (const source of names) {
        if (!reached.has(source))
          log.info({ source, outcome: 'not-started' }, 'source not started: stopping');
      }
      const durationMs = Math.round(performance.now() - started);
      log.info(
        { ...(await metrics.summary()), ...tally(outcomes, names.length), durationMs },
        'sync run finished',
      );
      return exitCodeFor(outcomes);
    }

    const health = await startWorkerHealth({
      config,
      registry: metrics.registry,
      logger,
      store,
      publisher,
      lastBeat: () => lastBeat,
    });
    log.info(
      {
        port: health.port,
        intervalMs: config.syncIntervalMs,
        sources: names.length,
        firstSource: runners[0]?.source,
      },
      'watching the feeds',
    );
    try {
      await watchSources({
        ...lanes,
        intervalMs: config.syncIntervalMs,
        logger,
        onBeat: beat,
        onOutcome: (outcome) => {
          observe(outcome);
          if (outcome.ok) logOutcome(log, outcome, outcome.result.stored > 0 ? 'info' : 'debug');
        },
      });
    } finally {
      await health.close();
    }
    return 0;
  } finally {
    await Promise.all(syncs.map((s) => s.close()));
    await relay.stop();
    await publisher.close();
    await store.close();
    shutdown.dispose();
  }
}

/** A turn that failed: it threw, or its events are stored but the outbox could not be drained. */
function failed(outcome: Outcome): boolean {
  return !outcome.ok || runFailed(outcome.result);
}

/**
 * 0 when every source tried caught up or was locked elsewhere; 3 when only keys were
 * rejected; 2 when every failure needs an operator (a key, a cursor the feed no longer
 * knows), as for one source; else 1: something a later run may get past.
 */
export function exitCodeFor(outcomes: readonly Outcome[]): number {
  const failures = outcomes.filter(failed);
  if (failures.length === 0) return 0;
  const codes = failures.map((o) => (o.ok ? 1 : exitCodeOf(o.error)));
  if (codes.every((c) => c === 3)) return 3;
  return codes.every((c) => c === 2 || c === 3) ? 2 : 1;
}

function tally(outcomes: readonly Outcome[], total: number): Record<string, number> {
  const count = (pick: (o: Outcome) => boolean): number => outcomes.filter(pick).length;
  return {
    sources: total,
    caught_up: count((o) => o.ok && o.result.status === 'caught-up' && o.result.drained),
    locked_elsewhere: count((o) => o.ok && o.result.status === 'locked'),
    failed: count(failed),
    not_started: total - outcomes.length,
  };
}

/** The summary line of one source's turn. */
function logOutcome(log: Logger, outcome: Outcome, level: 'info' | 'debug'): void {
  if (!outcome.ok) {
    const message = outcome.error instanceof Error ? outcome.error.message : String(outcome.error);
    log.error({ source: outcome.source, outcome: 'failed', err: outcome.error }, `source failed: ${message}`);
    return;
  }
  const r = outcome.result;
  const line = {
    source: outcome.source,
    outcome: r.status,
    drained: r.drained,
    stored: r.stored,
    duplicates: r.duplicates,
    quarantined: r.quarantined,
    pages: r.pages,
    cursor: r.cursor,
    durationMs: Math.round(r.durationMs),
  };
  if (!r.drained && r.status !== 'stopped')
    log.warn(line, 'source stored its events; the outbox was not drained');
  else log[level](line, 'source finished');
}
