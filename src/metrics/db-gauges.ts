import type { Store } from '../store/db.js';
import { overdueSources } from '../store/lease-statements.js';
import { outboxBacklog } from '../store/outbox.js';
import { fleetStates, lastSuccessSeconds, newestEventLagSeconds } from '../store/source-states.js';
import type { GaugeSource } from './metrics.js';

/**
 * The gauges read from Postgres for `sources`: lag of each one's newest stored event
 * (one index probe per source), its last success, and the outbox backlog. An event
 * dated in the future is left out of the lag: one `created_at` of 9999 from the feed
 * would otherwise hold it below zero for good, and FeedsyncCursorLag could never fire.
 * A source is overdue once it has been due for a whole `intervalMs` without a claim.
 */
export function dbGauges(store: Store, sources: readonly string[], intervalMs: number): GaugeSource {
  return {
    cursorLagSeconds: () => newestEventLagSeconds(store, sources),
    outboxBacklog: () => outboxBacklog(store),
    fleetStates: (k) => fleetStates(store, sources, k),
    sourcesOverdue: () => overdueSources(store, intervalMs),
    lastSuccessSeconds: () => lastSuccessSeconds(store, sources),
  };
}
