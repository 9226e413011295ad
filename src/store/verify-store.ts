import type { ServiceEvent } from '../api/types.js';
import { unstorableText } from './applier.js';
import { quoteSchema, type Store } from './db.js';

/** How a batch of the feed's events compares with what the source stored. */
export interface Comparison {
  /** Served and not stored, in feed order. */
  missing: ServiceEvent[];
  /** Ids stored with other content (type, the instant of created_at, or data as jsonb). */
  differing: string[];
  /** Never storable as such (a NUL, a lone surrogate): the applier keeps them in quarantine. */
  unstorable: number;
}

/**
 * Compares the feed's events with the stored ones in one statement, content as the
 * applier compares it for conflicts (Postgres's view: the instant of created_at, data as
 * jsonb, so key order or another offset is no difference).
 */
export async function compareWithStore(
  store: Store,
  source: string,
  events: readonly ServiceEvent[],
): Promise<Comparison> {
  const seen = new Set<string>();
  const unique: ServiceEvent[] = [];
  let unstorable = 0;
  for (const event of events) {
    if (seen.has(event.id)) continue;
    seen.add(event.id);
    if (unstorableText(event, JSON.stringify(event.data)) === null) unique.push(event);
    else unstorable++;
  }
  const comparison: Comparison = { missing: [], differing: [], unstorable };
  if (unique.length === 0) return comparison;
  const { rows } = await store.pool.query<{ ord: string; stored: boolean }>(
    `SELECT i.ord, e.id IS NOT NULL AS stored
      FROM ROWS FROM (jsonb_to_recordset($2::jsonb) AS (id text, type text, created_at text, data jsonb))
        WITH ORDINALITY AS i(id, type, created_at, data, ord)
        LEFT JOIN ${quoteSchema(store.schema)}.events e ON e.source = $1 AND e.id = i.id
      WHERE e.id IS NULL
        OR (e.type, e.created_at, e.data) IS DISTINCT FROM (i.type, i.created_at::timestamptz, i.data)
      ORDER BY i.ord`,
    // The four fields compared, nothing more (the applier's JSON adds what its projections key by).
    [
      source,
      JSON.stringify(unique.map((e) => ({ id: e.id, type: e.type, created_at: e.created_at, data: e.data }))),
    ],
  );
  for (const row of rows) {
    const event = unique[Number(row.ord) - 1]!;
    if (row.stored) comparison.differing.push(event.id);
    else comparison.missing.push(event);
  }
  return comparison;
}

/**
 * The source's oldest event still stored, by arrival (received_at, then id), as the
 * retention prunes: what arrived before it is gone by the retention. Null when none is.
 */
export async function oldestKeptEvent(store: Store, source: string): Promise<string | null> {
  const { rows } = await store.pool.query<{ id: string }>(
    `SELECT id FROM ${quoteSchema(store.schema)}.events WHERE source = $1 ORDER BY received_at, id LIMIT 1`,
    [source],
  );
  return rows[0]?.id ?? null;
}

/** One finished `feedsync verify` of a source, as `status` shows it. */
export interface VerifyRun {
  source: string;
  finishedAt: Date;
  missing: number;
  differing: number;
  /** Of the missing, those --repair stored and handed over. */
  repaired: number;
  checked: number;
  ok: boolean;
}

/** Keeps this run as the source's last (one row per source). */
export async function recordVerifyRun(store: Store, run: VerifyRun): Promise<void> {
  await store.pool.query(
    `INSERT INTO ${quoteSchema(store.schema)}.verify_runs AS v
        (source, finished_at, missing, differing, repaired, checked, ok)
      VALUES ($1, $2, $3, $4, $5, $6, $7)
      ON CONFLICT (source) DO UPDATE SET finished_at = excluded.finished_at, missing = excluded.missing,
        differing = excluded.differing, repaired = excluded.repaired, checked = excluded.checked, ok = excluded.ok`,
    [run.source, run.finishedAt, run.missing, run.differing, run.repaired, run.checked, run.ok],
  );
}
