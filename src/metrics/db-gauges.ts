import { quoteSchema, type Store } from '../store/db.js';
import { overdueSources } from '../store/lease.js';
import { outboxBacklog } from '../store/outbox.js';
import { fleetStates } from '../store/source-states.js';
import type { GaugeSource } from './metrics.js';

/**
 * The gauges read from Postgres for `sources`: lag of each one's newest stored event
 * (one index probe per source), its last success, and the outbox backlog. An event
 * dated in the future is left out of the lag: one `created_at` of 9999 from the feed
 * would otherwise hold it below zero for good, and FeedsyncCursorLag could never fire.
 * A source is overdue once it has been due for a whole `intervalMs` without a claim.
 */
export function dbGauges(store: Store, sources: readonly string[], intervalMs: number): GaugeSource {
  const s = quoteSchema(store.schema);
  const perSource = async (select: string): Promise<ReadonlyMap<string, number>> => {
    const { rows } = await store.pool.query<{ source: string; value: number | null }>(
      `SELECT src AS source, (${select}) AS value FROM unnest($1::text[]) AS src`,
      [sources],
    );
    return new Map(rows.flatMap((r) => (r.value === null ? [] : [[r.source, r.value] as const])));
  };
  return {
    cursorLagSeconds: () =>
      perSource(
        `SELECT extract(epoch FROM now() - max(created_at))::float8 FROM ${s}.events e
          WHERE e.source = src AND e.created_at <= now()`,
      ),
    outboxBacklog: () => outboxBacklog(store),
    fleetStates: (k) => fleetStates(store, sources, k),
    sourcesOverdue: () => overdueSources(store, intervalMs),
    lastSuccessSeconds: () =>
      perSource(
        `SELECT extract(epoch FROM last_success_at)::float8 FROM ${s}.cursors c WHERE c.source = src`,
      ),
  };
}
