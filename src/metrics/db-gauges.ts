import { outboxBacklog } from '../queue/relay.js';
import { quoteSchema, type Store } from '../store/db.js';
import type { GaugeSource } from './metrics.js';

/** The gauges read from Postgres: lag of the newest stored event, and the outbox backlog. */
export function dbGauges(store: Store, source: string): GaugeSource {
  return {
    async cursorLagSeconds() {
      const { rows } = await store.pool.query<{ lag: number | null }>(
        `SELECT extract(epoch FROM now() - max(created_at))::float8 AS lag FROM ${quoteSchema(store.schema)}.events WHERE source = $1`,
        [source],
      );
      return rows[0]?.lag ?? null;
    },
    outboxBacklog: () => outboxBacklog(store),
    async lastSuccessSeconds() {
      const { rows } = await store.pool.query<{ at: number | null }>(
        `SELECT extract(epoch FROM last_success_at)::float8 AS at FROM ${quoteSchema(store.schema)}.cursors WHERE source = $1`,
        [source],
      );
      return rows[0]?.at ?? null;
    },
  };
}
