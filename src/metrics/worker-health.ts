import type { Registry } from 'prom-client';
import { maxBackoffMs } from '../config/backoff.js';
import type { Config } from '../config/config.js';
import type { Logger } from '../logger.js';
import type { Publisher } from '../queue/publisher.js';
import type { Store } from '../store/db.js';
import { pingPostgres } from '../store/health.js';
import { startHealthServer } from './server.js';

/**
 * The watch loop's /healthz, /readyz and /metrics, for one source and for a sources file.
 *
 * The loop beats at each run's start and end, each commit and each retry: between two beats
 * it either sleeps (at most the longest backoff) or waits on one request (its timeouts, or a
 * Retry-After). Liveness goes stale after the longer of the two plus three intervals, or
 * at once while one lane's turn shows no progress (SourceLease.stalled): the loop may beat
 * for the other lanes. Failing runs keep it fresh: restarting the pod cannot fix the
 * service's outage (docs/DEPLOYMENT.md, Probes). Readiness says whether Postgres and Redis answer.
 */
export function startWorkerHealth(opts: {
  config: Config;
  registry: Registry;
  logger: Logger;
  store: Store;
  publisher: Publisher;
  /** When the loop last beat (Date.now() milliseconds). */
  lastBeat: () => number;
  /** A turn in flight that shows no progress (its lease is no longer renewed), or null. */
  stalledSource: () => string | null;
}): ReturnType<typeof startHealthServer> {
  const { config } = opts;
  const staleAfterMs =
    Math.max(maxBackoffMs(config.syncIntervalMs), 2 * config.feed.timeoutMs + config.feed.maxRetryWaitMs) +
    3 * config.syncIntervalMs;
  // The stalled source last logged: one line when a lane stalls, not one a probe.
  let told: string | null = null;
  return startHealthServer({
    port: config.metricsPort,
    host: config.metricsHost,
    registry: opts.registry,
    logger: opts.logger,
    live: () => {
      const stalled = opts.stalledSource();
      if (stalled !== null && stalled !== told) {
        opts.logger.error(
          { source: stalled },
          'a turn made no progress for longer than SOURCE_LEASE_MS plus FEED_TIMEOUT_MS: its lease is ' +
            'no longer renewed, and /healthz fails until it moves on or the process is restarted',
        );
      }
      told = stalled;
      return stalled === null && Date.now() - opts.lastBeat() < staleAfterMs;
    },
    ready: async () => {
      const [postgres, redis] = await Promise.all([pingPostgres(opts.store.pool), opts.publisher.ping()]);
      return { ok: postgres && redis, checks: { postgres, redis } };
    },
  });
}
