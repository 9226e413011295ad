import { sql } from 'kysely';
import type { Store } from './db.js';

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
}

export async function getCursor(store: Store, source: string): Promise<CursorRow | null> {
  const row = await store.db
    .selectFrom('cursors')
    .select(['source', 'after_id', 'types', 'updated_at', 'last_success_at'])
    .where('source', '=', source)
    .executeTakeFirst();
  return row
    ? {
        source: row.source,
        afterId: row.after_id,
        types: row.types,
        updatedAt: row.updated_at,
        lastSuccessAt: row.last_success_at,
      }
    : null;
}

/**
 * Creates the cursor at the start of the feed with `types` if the source has none,
 * and returns the row as stored. An existing row keeps its own types: the caller
 * compares them with its filter.
 */
export async function ensureCursor(
  store: Store,
  source: string,
  types: readonly string[] | null,
): Promise<CursorRow> {
  await store.db
    .insertInto('cursors')
    .values({ source, after_id: null, types })
    .onConflict((oc) => oc.column('source').doNothing())
    .execute();
  // A separate statement: it sees a row that a concurrent run committed after ours began.
  const row = await getCursor(store, source);
  if (!row) throw new Error(`cursor of source ${source} vanished while being created`);
  return row;
}

/**
 * Moves the cursor (`cursor set`, `cursor reset` with null), creating it if needed.
 * `types` replaces the stored filter when given, and is left alone when omitted.
 */
export async function setCursor(
  store: Store,
  source: string,
  afterId: string | null,
  types?: readonly string[] | null,
): Promise<void> {
  await store.db
    .insertInto('cursors')
    .values({ source, after_id: afterId, types: types ?? null })
    .onConflict((oc) =>
      oc.column('source').doUpdateSet((eb) => ({
        after_id: eb.ref('excluded.after_id'),
        updated_at: sql<Date>`now()`,
        ...(types === undefined ? {} : { types: eb.ref('excluded.types') }),
      })),
    )
    .execute();
}

/** Records that a run of `source` caught up now. */
export async function markSuccess(store: Store, source: string): Promise<void> {
  await store.db
    .updateTable('cursors')
    .set({ last_success_at: sql<Date>`now()` })
    .where('source', '=', source)
    .execute();
}

/** Whether `source` has stored the event `id`: a next_after that names one points back (src/sync/cursor-guard.ts). */
export async function isStored(store: Store, source: string, id: string): Promise<boolean> {
  const row = await store.db
    .selectFrom('events')
    .select('id')
    .where('source', '=', source)
    .where('id', '=', id)
    .executeTakeFirst();
  return row !== undefined;
}
