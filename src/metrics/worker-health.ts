import type { Registry } from 'prom-client';
import type { Logger } from '../logger.js';
import type { Publisher } from '../queue/publisher.js';
import type { Store } from '../store/db.js';
import { pingPostgres } from '../store/health.js';
import { startHealthServer } from './server.js';

/**
 * The watch loop's /healthz, /readyz and /metrics, for one source and for a sources file.
 *
 * Liveness goes stale when the loop has not beaten for `staleAfterMs`, or at once while one
 * lane's turn shows no progress (SourceLease.stalled): the loop may beat for the other
 * lanes. Failing runs keep it fresh: restarting the pod cannot fix the service's outage
 * (docs/DEPLOYMENT.md, Probes). Readiness says whether Postgres and the queues (Redis, or their Postgres) answer.
 */
export function startWorkerHealth(opts: {
  /** METRICS_PORT and METRICS_HOST. */
  port: number;
  host: string;
  /** How long the loop may go without a beat. */
  staleAfterMs: number;
  registry: Registry;
  logger: Logger;
  store: Store;
  publisher: Publisher;
  /** When the loop last beat (Date.now() milliseconds). */
  lastBeat: () => number;
  /** A turn in flight that shows no progress (its lease is no longer renewed), or null. */
  stalledSource: () => string | null;
}): ReturnType<typeof startHealthServer> {
  const { staleAfterMs } = opts;
  // The stalled source last logged: one line when a lane stalls, not one a probe.
  let told: string | null = null;
  return startHealthServer({
    port: opts.port,
    host: opts.host,
    registry: opts.registry,
    logger: opts.logger,
    live: () => {
      const stalled = opts.stalledSource();
      if (stalled !== null && stalled !== told) {
        opts.logger.error(
          { source: stalled },
          'a turn made no progress for longer than SOURCE_LEASE_MS plus SYNC_CONCURRENCY x FEED_TIMEOUT_MS: its lease is ' +
            'no longer renewed, and /healthz fails until it moves on or the process is restarted',
        );
      }
      told = stalled;
      return stalled === null && Date.now() - opts.lastBeat() < staleAfterMs;
    },
    ready: async () => {
      const [postgres, queues] = await Promise.all([pingPostgres(opts.store.pool), opts.publisher.ping()]);
      return { ok: postgres && queues, checks: { postgres, [opts.publisher.pings]: queues } };
    },
  });
}
