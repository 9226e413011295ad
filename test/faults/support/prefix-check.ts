import type { Store } from '../../../src/store/db.js';

/** What the store holds of a simulator feed, whose ids are consecutive positions. */
export interface PrefixState {
  stored: number;
  /** Position of the cursor (0 at the start). */
  cursor: number;
  /** The highest position stored. */
  highest: number;
  /** Pages (runs of `pageSize` positions) stored in part only. */
  partialPages: number;
  /** Outbox rows of the source. */
  outboxRows: number;
}

/**
 * Reads the state that every fault must leave behind: the events stored are
 * exactly positions 1..cursor, so no page is stored in part and nothing lies past
 * the cursor.
 */
export async function prefixState(store: Store, pageSize: number, source = 'default'): Promise<PrefixState> {
  const s = `"${store.schema}"`;
  // One statement, so one snapshot: a commit of a worker that has just exited (its
  // COMMIT was on the wire) lands before or after all of it, never between two reads.
  const { rows } = await store.pool.query<{
    stored: number;
    highest: number | null;
    partial: number;
    after_id: string | null;
    outbox: number;
  }>(
    `WITH pos AS (SELECT substr(id, 5)::bigint AS p FROM ${s}.events WHERE source = $1 AND id ~ '^evt_[0-9]{12}$'),
          pages AS (SELECT (p - 1) / $2 AS page, count(*) AS n FROM pos GROUP BY 1)
     SELECT (SELECT count(*)::int FROM pos) AS stored, (SELECT max(p)::int FROM pos) AS highest,
            (SELECT count(*)::int FROM pages WHERE n <> $2) AS partial,
            (SELECT after_id FROM ${s}.cursors WHERE source = $1) AS after_id,
            (SELECT count(*)::int FROM ${s}.outbox WHERE source = $1) AS outbox`,
    [source, pageSize],
  );
  const id = rows[0]?.after_id ?? null;
  return {
    stored: rows[0]?.stored ?? 0,
    highest: rows[0]?.highest ?? 0,
    cursor: id === null ? 0 : Number(id.slice(4)),
    partialPages: rows[0]?.partial ?? 0,
    outboxRows: rows[0]?.outbox ?? 0,
  };
}

/** True when the stored events are exactly 1..cursor. */
export function isPrefix(state: PrefixState): boolean {
  return state.stored === state.cursor && state.highest === state.cursor;
}
