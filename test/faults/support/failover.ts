import type { Sandbox } from './sandbox.js';

/** Outbox rows marked published so far: how far a run's publishing has come. */
export async function publishedRows(box: Sandbox): Promise<number> {
  const { rows } = await box.store.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${box.schema}".outbox WHERE published_at IS NOT NULL`,
  );
  return rows[0]!.n;
}

/** Outbox rows still waiting to be published. */
export async function unpublishedRows(box: Sandbox): Promise<number> {
  const { rows } = await box.store.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${box.schema}".outbox WHERE published_at IS NULL`,
  );
  return rows[0]!.n;
}

/** The relay's failed attempts in a run's log, and how many of them were for want of a replica's acknowledgement. */
export function relayFailures(log: string): { failures: number; notReplicated: number } {
  const lines = log.split('\n').filter((l) => l.includes('outbox relay failed'));
  return {
    failures: lines.length,
    notReplicated: lines.filter((l) => l.includes('REDIS_NOT_REPLICATED')).length,
  };
}
