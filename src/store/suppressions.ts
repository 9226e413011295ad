import { addressKeySql } from './address-key.js';
import { quoteSchema, type Store, type SuppressionReason } from './db.js';
import { lookupForms } from './mailboxes.js';

/** One suppressed address of a source, as `suppressions list` shows it. */
export interface Suppression {
  source: string;
  address: string;
  reason: SuppressionReason;
  /** The event that decided it. */
  eventId: string;
  /** That event's created_at. */
  at: Date;
}

interface Row {
  source: string;
  address: string;
  reason: SuppressionReason;
  event_id: string;
  at: Date;
}

const toSuppression = (r: Row): Suppression => ({
  source: r.source,
  address: r.address,
  reason: r.reason,
  eventId: r.event_id,
  at: r.at,
});

/** Every suppressed address of `source`, in address order. */
export async function listSuppressions(
  store: Store,
  source: string,
  limit: number | null = null,
): Promise<{ rows: Suppression[]; total: number }> {
  const { rows } = await store.pool.query<Row & { total: string }>(
    `SELECT source, address, reason, event_id, at, count(*) OVER () AS total
      FROM ${quoteSchema(store.schema)}.suppressions
      WHERE source = $1 ORDER BY address, reason LIMIT $2`,
    [source, limit],
  );
  return { rows: rows.map(toSuppression), total: Number(rows[0]?.total ?? 0) };
}

/**
 * The suppressions of `source` among `addresses` (every reason of each), each looked up
 * by the keys of its mailboxes (mailboxes.ts, then address_key(): the apply
 * statement's own).
 */
export async function suppressionsAmong(
  store: Store,
  source: string,
  addresses: readonly string[],
): Promise<Suppression[]> {
  const { rows } = await store.pool.query<Row>(
    `SELECT source, address, reason, event_id, at FROM ${quoteSchema(store.schema)}.suppressions
      WHERE source = $1 AND address IN (SELECT ${addressKeySql(quoteSchema(store.schema), 'a')} FROM unnest($2::text[]) AS a)
      ORDER BY address, reason`,
    [source, addresses.flatMap(lookupForms)],
  );
  return rows.map(toSuppression);
}

/** What `suppressions remove` did: the rows it deleted, and the reasons that still stand. */
export interface Removal {
  removed: Suppression[];
  standing: Suppression[];
}

/**
 * Deletes the suppressions of `address` (the keys of its mailboxes, as `send` looks
 * them up) for `source` whose reason is one of `reasons`:
 * an explicit decision of the application's operator. Returns what was removed and what
 * still stands (read in the same statement, so the two agree). A new bounce, complaint
 * or (while the contact stays unsubscribed) a newer unsubscribe of the address
 * suppresses it again; events already stored never do.
 */
export async function removeSuppressions(
  store: Store,
  source: string,
  address: string,
  reasons: readonly SuppressionReason[],
): Promise<Removal> {
  const s = quoteSchema(store.schema);
  const { rows } = await store.pool.query<Row & { removed: boolean }>(
    `WITH gone AS (
       DELETE FROM ${s}.suppressions
       WHERE source = $1 AND address IN (SELECT ${addressKeySql(s, 'a')} FROM unnest($2::text[]) AS a)
         AND reason = ANY($3::text[])
       RETURNING source, address, reason, event_id, at
     )
     SELECT source, address, reason, event_id, at, true AS removed FROM gone
     UNION ALL
     SELECT source, address, reason, event_id, at, false FROM ${s}.suppressions
     WHERE source = $1 AND address IN (SELECT ${addressKeySql(s, 'a')} FROM unnest($2::text[]) AS a)
       AND reason <> ALL($3::text[])
     ORDER BY reason`,
    [source, lookupForms(address), reasons],
  );
  return {
    removed: rows.filter((r) => r.removed).map(toSuppression),
    standing: rows.filter((r) => !r.removed).map(toSuppression),
  };
}
