import { addressKeySql } from './address-key.js';
import { quoteSchema, type Store, type SuppressionReason } from './db.js';

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
export async function listSuppressions(store: Store, source: string): Promise<Suppression[]> {
  const { rows } = await store.pool.query<Row>(
    `SELECT source, address, reason, event_id, at FROM ${quoteSchema(store.schema)}.suppressions
      WHERE source = $1 ORDER BY address`,
    [source],
  );
  return rows.map(toSuppression);
}

/**
 * The suppressions of `source` among `addresses`, each looked up by its key (trimmed,
 * lower-cased by the same expression as the apply statement's).
 */
export async function suppressionsAmong(
  store: Store,
  source: string,
  addresses: readonly string[],
): Promise<Suppression[]> {
  const { rows } = await store.pool.query<Row>(
    `SELECT source, address, reason, event_id, at FROM ${quoteSchema(store.schema)}.suppressions
      WHERE source = $1 AND address IN (SELECT ${addressKeySql('a')} FROM unnest($2::text[]) AS a)
      ORDER BY address`,
    [source, addresses],
  );
  return rows.map(toSuppression);
}

/**
 * Deletes the suppression of `address` for `source`: an explicit decision of the
 * application's operator. Returns what was removed, or null when it was not there. A
 * new bounce, complaint or (while the contact stays unsubscribed) a newer unsubscribe
 * of the address suppresses it again; events already stored never do.
 */
export async function removeSuppression(
  store: Store,
  source: string,
  address: string,
): Promise<Suppression | null> {
  const { rows } = await store.pool.query<Row>(
    `DELETE FROM ${quoteSchema(store.schema)}.suppressions WHERE source = $1 AND address = ${addressKeySql('$2::text')}
      RETURNING source, address, reason, event_id, at`,
    [source, address],
  );
  return rows[0] ? toSuppression(rows[0]) : null;
}
