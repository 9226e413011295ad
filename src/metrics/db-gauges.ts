import { quoteSchema, type Store } from '../store/db.js';
import { outboxBacklog } from '../store/outbox.js';
import type { GaugeSource } from './metrics.js';

/**
 * The gauges read from Postgres for `sources`: lag of each one's newest stored event
 * (one index probe per source), its last success, and the outbox backlog.
 */
export function dbGauges(store: Store, sources: readonly string[]): GaugeSource {
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
        `SELECT extract(epoch FROM now() - max(created_at))::float8 FROM ${s}.events e WHERE e.source = src`,
      ),
    outboxBacklog: () => outboxBacklog(store),
    lastSuccessSeconds: () =>
      perSource(
        `SELECT extract(epoch FROM last_success_at)::float8 FROM ${s}.cursors c WHERE c.source = src`,
      ),
  };
}
