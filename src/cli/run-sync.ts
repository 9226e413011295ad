import { setFlagsFromString } from 'node:v8';
import type { Config } from '../config.js';
import { hostOf } from '../connection-url.js';
import type { Logger } from '../logger.js';
import { dbGauges } from '../metrics/db-gauges.js';
import { createMetrics } from '../metrics/metrics.js';
import { pushMetrics } from '../metrics/push.js';
import { startWorkerHealth } from '../metrics/worker-health.js';
import { createStore } from '../store/db.js';
import { shutdownSignal } from '../sync/signals.js';
import { createSync, type RunResult, runFailed } from '../sync/sync.js';
import { watch } from '../sync/watch.js';
import { progressReporter } from './progress.js';
import { redisAdvice } from './redis-advice.js';

/**
 * V8 lets the old generation grow to four times what survived the last full
 * collection before collecting again; during a catch-up that is what pushes the
 * worker's RSS past 200 MB. Growing it by half keeps the peak near 150 MB at no
 * measurable cost in rate (docs/BENCHMARKS.md, Memory).
 */
const HEAP_GROWING_FLAG = '--heap-growing-percent=50';

/** `feedsync sync`: one run (--once) or the loop (--watch). Returns the exit code. */
export async function runSync(
  config: Config,
  logger: Logger,
  opts: { watch: boolean; migrate: boolean },
): Promise<number> {
  setFlagsFromString(HEAP_GROWING_FLAG);
  if (config.sourcesFile !== null) {
    const { runSources } = await import('./run-sources.js');
    return runSources(config, logger, opts);
  }
  const shutdown = shutdownSignal(logger);
  const progress = progressReporter();
  let lastBeat = Date.now();
  const beat = (): void => {
    lastBeat = Date.now();
  };
  const store = createStore({ ...config.database, logger });
  const source = config.feed.source;
  const metrics = createMetrics(dbGauges(store, [source]), [source]);
  const hooks = metrics.hooksFor(source);
  const sync = createSync(config, {
    logger,
    store,
    autoMigrate: opts.migrate,
    hooks: {
      ...hooks,
      onCommit: (info) => {
        progress.onCommit(info);
        hooks.onCommit(info);
        beat();
      },
      onRetry: (info) => {
        hooks.onRetry(info);
        beat();
      },
    },
  });
  const log = logger.child({ module: 'cli' });

  try {
    if (!opts.watch) {
      let result: RunResult | undefined;
      try {
        result = await sync.runOnce(shutdown.signal);
        metrics.observeRun(source, result);
      } catch (err) {
        metrics.observeFailure(source);
        throw err;
      } finally {
        // A run that found the lock taken did nothing worth reporting.
        if (config.pushgatewayUrl && result?.status !== 'locked') {
          await pushMetrics(config.pushgatewayUrl, metrics.registry, { source: config.feed.source }, log);
        }
      }
      progress.done();
      const summary = await metrics.summary();
      log.info(
        {
          ...summary,
          status: result.status,
          cursor: result.cursor,
          durationMs: Math.round(result.durationMs),
        },
        'sync run finished',
      );
      if (!result.drained && result.status !== 'stopped') {
        process.stderr.write(
          `feedsync: the events are stored, but Redis (REDIS_URL, ${hostOf(config.redis.url)}) did not take their jobs; ` +
            `${redisAdvice(sync.relay.lastError)}: the next run hands them over\n`,
        );
      }
      return exitCode(result);
    }

    const health = await startWorkerHealth({
      config,
      registry: metrics.registry,
      logger,
      store: sync.store,
      publisher: sync.publisher,
      lastBeat: () => lastBeat,
    });
    log.info(
      { host: config.metricsHost, port: health.port, intervalMs: config.syncIntervalMs },
      'watching the feed',
    );
    try {
      await watch({
        sync,
        intervalMs: config.syncIntervalMs,
        signal: shutdown.signal,
        logger,
        onBeat: beat,
        onRun: (result) => {
          metrics.observeRun(source, result);
          log.info(
            { status: result.status, stored: result.stored, pages: result.pages },
            'sync run finished',
          );
        },
        onFailure: () => metrics.observeFailure(source),
      });
    } finally {
      await health.close();
    }
    return 0;
  } finally {
    progress.done();
    await sync.close();
    await store.close();
    shutdown.dispose();
  }
}

/** A run stopped by SIGTERM exits 0 without draining: the next run drains. Redis down is exit 1. */
function exitCode(result: RunResult): number {
  return runFailed(result) ? 1 : 0;
}
