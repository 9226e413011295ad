import type { KeyKind } from '../config/key-kind.js';
import { FeedsyncError } from '../errors.js';
import { quoteSchema, type Store } from './db.js';

/** One source's position in the feed. */
export interface CursorRow {
  source: string;
  /** The id to read after; null means the start of the feed. */
  afterId: string | null;
  /** The type filter the cursor was built with (full names); null means every type. */
  types: string[] | null;
  updatedAt: Date;
  /** End of the last run that caught up, or null before the first. */
  lastSuccessAt: Date | null;
  /** The kind of API key the cursor was built with; null: not recorded yet. */
  keyKind: KeyKind | null;
}

interface Row {
  source: string;
  after_id: string | null;
  types: string[] | null;
  updated_at: Date;
  last_success_at: Date | null;
  key_kind: KeyKind | null;
}

/** The cursors table's qualified name; the schema is a checked lowercase identifier. */
const cursors = (store: Store): string => `${quoteSchema(store.schema)}.cursors`;

export async function getCursor(store: Store, source: string): Promise<CursorRow | null> {
  const { rows } = await store.pool.query<Row>(
    `SELECT source, after_id, types, updated_at, last_success_at, key_kind FROM ${cursors(store)} WHERE source = $1`,
    [source],
  );
  const row = rows[0];
  return row
    ? {
        source: row.source,
        afterId: row.after_id,
        types: row.types,
        updatedAt: row.updated_at,
        lastSuccessAt: row.last_success_at,
        keyKind: row.key_kind,
      }
    : null;
}

/** A name `sources rename` or `sources retire` took out of the fleet (retired_sources). */
interface RetiredMark {
  renamed_to: string | null;
  retired_at: Date;
}

/**
 * The refusal of a source whose name was renamed or retired while a sources file (another
 * replica's, not rolled out yet) still names it: its feed is not read, or it would be
 * stored again from the start under the old name.
 */
function retiredError(source: string, mark: RetiredMark): FeedsyncError {
  const when = mark.retired_at.toISOString();
  const what =
    mark.renamed_to === null
      ? `was retired ("feedsync sources retire", ${when})`
      : `was renamed to ${mark.renamed_to} ("feedsync sources rename", ${when})`;
  return new FeedsyncError(
    `source ${source} ${what}, but this worker's sources file still names it: its feed is not read ` +
      '(it would be stored again from the start under the old name). Remove it from FEED_SOURCES_FILE' +
      `${mark.renamed_to === null ? '' : ` (its events are under ${mark.renamed_to} now)`}; to start a new feed ` +
      `under this name on purpose, "feedsync sources reuse ${source}"`,
    { code: 'SOURCE_RETIRED', exitCode: 2 },
  );
}

/**
 * Creates the cursor at the start of the feed with `types` and `keyKind` if the source
 * has none, and returns the row as stored. An existing row keeps its own types and key
 * kind: the caller compares them with its own.
 */
export async function ensureCursor(
  store: Store,
  source: string,
  types: readonly string[] | null,
  keyKind: KeyKind | null = null,
): Promise<CursorRow> {
  // One statement: a rename or retire that commits between a look and an insert would
  // leave a cursor at the feed's start under the old name.
  const { rows } = await store.pool.query<RetiredMark>(
    `WITH mark AS (
       SELECT renamed_to, retired_at FROM ${quoteSchema(store.schema)}.retired_sources WHERE source = $1
     ), made AS (
       INSERT INTO ${cursors(store)} (source, after_id, types, key_kind)
       SELECT $1, NULL, $2, $3 WHERE NOT EXISTS (SELECT FROM mark)
       ON CONFLICT (source) DO NOTHING
     )
     SELECT renamed_to, retired_at FROM mark`,
    [source, types, keyKind],
  );
  if (rows[0]) throw retiredError(source, rows[0]);
  // A separate statement: it sees a row that a concurrent run committed after ours began.
  const row = await getCursor(store, source);
  if (!row) throw new Error(`cursor of source ${source} vanished while being created`);
  return row;
}

/**
 * Moves the cursor (`cursor set`, `cursor reset` with null), creating it if needed.
 * `types` replaces the stored filter when given, and is left alone when omitted.
 * With `leaseToken` the move lands only while the source's lease has that token
 * (checked in the same statement); returns whether it landed.
 */
export async function setCursor(
  store: Store,
  source: string,
  afterId: string | null,
  types?: readonly string[] | null,
  leaseToken?: string,
): Promise<boolean> {
  const { rowCount } = await store.pool.query(
    `WITH lease AS (
       SELECT FROM ${quoteSchema(store.schema)}.leases
       WHERE $4::bigint IS NOT NULL AND source = $1 AND token = $4::bigint FOR KEY SHARE
     )
     INSERT INTO ${cursors(store)} (source, after_id, types)
     SELECT $1::text, $2::text, $3::text[] WHERE $4::bigint IS NULL OR EXISTS (SELECT FROM lease)
     ON CONFLICT (source) DO UPDATE SET after_id = excluded.after_id, updated_at = now(),
       check_before = NULL, check_digest = NULL
       ${types === undefined ? '' : ', types = excluded.types'}`,
    [source, afterId, types ?? null, leaseToken ?? null],
  );
  return rowCount === 1;
}

/**
 * Records the kind of key of a cursor that has none recorded (made before migration
 * 0012, or reset with `--allow-key-change`); a kind already there is kept.
 */
export async function recordKeyKind(store: Store, source: string, keyKind: KeyKind): Promise<void> {
  await store.pool.query(
    `UPDATE ${cursors(store)} SET key_kind = $2 WHERE source = $1 AND key_kind IS NULL`,
    [source, keyKind],
  );
}

/** Forgets the kind of key of a cursor (`cursor reset --allow-key-change`): the next turn records its own. */
export async function forgetKeyKind(store: Store, source: string): Promise<void> {
  await store.pool.query(`UPDATE ${cursors(store)} SET key_kind = NULL WHERE source = $1`, [source]);
}

/** Whether `source` has stored the event `id`: a next_after that names one points back (src/sync/cursor-guard.ts). */
export async function isStored(store: Store, source: string, id: string): Promise<boolean> {
  const { rows } = await store.pool.query(
    `SELECT FROM ${quoteSchema(store.schema)}.events WHERE source = $1 AND id = $2`,
    [source, id],
  );
  return rows.length > 0;
}

/**
 * Reads events, writes nothing: when the event `id` of `source` arrived (its
 * received_at, Postgres's clock); null when it is not stored. For requeue from an event
 * that has no outbox row of its own.
 */
export async function receivedAtOf(store: Store, source: string, id: string): Promise<Date | null> {
  const { rows } = await store.pool.query<{ received_at: Date }>(
    `SELECT received_at FROM ${quoteSchema(store.schema)}.events WHERE source = $1 AND id = $2`,
    [source, id],
  );
  return rows[0]?.received_at ?? null;
}

/** At most this many stored names are read for a suggestion: a fleet may hold 100,000. */
const NEAR_NAMES_READ = 1000;

/**
 * Whether `source` has a stored cursor, and some stored sources whose names are within
 * two characters of its length (at most NEAR_NAMES_READ), to suggest the one meant.
 */
export async function storedSourcesNear(
  store: Store,
  source: string,
): Promise<{ stored: boolean; near: string[] }> {
  const { rows } = await store.pool.query<{ stored: boolean; near: string[] }>(
    `SELECT EXISTS (SELECT FROM ${cursors(store)} WHERE source = $1) AS stored,
       ARRAY(SELECT source FROM ${cursors(store)} WHERE length(source) BETWEEN $2 AND $3
         ORDER BY source LIMIT ${NEAR_NAMES_READ}) AS near`,
    [source, source.length - 2, source.length + 2],
  );
  return rows[0] ?? { stored: false, near: [] };
}
