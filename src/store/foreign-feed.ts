import type { ServiceEvent } from '../api/types.js';
import { FeedsyncError } from '../errors.js';
import { quoteSchema, type Store } from './db.js';

/**
 * A page is another account's feed when at least this many of its events, and more
 * than half of them, were stored before under the same ids with other content. Ids
 * repeat across accounts (and across restarts of the simulator), so such a page is what
 * a source reads after its key was swapped for another account's, or after its cursor
 * was reset against a feed that started over. A service that re-serves a few events
 * with other content (the conflicts of docs/DESIGN.md, recorded and counted) stays
 * under the rule: ten such events on one page is no longer "a few".
 */
export const FOREIGN_FEED_MIN = 10;

/** The exit code of a once run stopped by another account's feed. */
export const EXIT_FOREIGN_FEED = 5;

/** What the page applier found on the first such page of a batch. */
export interface ForeignPage {
  /** Events of the page stored before with other content. */
  conflicts: number;
  /** Events of the page (distinct ids). */
  events: number;
}

/**
 * The error that stops a source on such a page: nothing of the batch was stored and
 * the cursor did not move. One line, naming the likely causes and what to do.
 */
export function foreignFeedError(source: string, page: ForeignPage): FeedsyncError {
  return new FeedsyncError(
    `source ${source}: ${page.conflicts} of the ${page.events} events of a page were stored before with other ` +
      "content under the same ids: this is not the feed the source was synced from (another account's key in " +
      'FEED_API_KEY, a simulator restarted since, or a cursor reset against another feed); nothing of the page ' +
      "was stored and the cursor did not move. Put the source's own key back, or give this feed a FEED_SOURCE " +
      'of its own (against a restarted simulator: a fresh DATABASE_SCHEMA)',
    { code: 'FOREIGN_FEED', exitCode: EXIT_FOREIGN_FEED },
  );
}

/**
 * Of `events`, how many the source has stored, and how many of those with other
 * content (compared as the apply statement compares them). Read only where a feed does
 * not know the cursor: whether it is another feed altogether.
 */
export async function storedDiffering(
  store: Store,
  source: string,
  events: readonly ServiceEvent[],
): Promise<{ stored: number; differ: number }> {
  if (events.length === 0) return { stored: 0, differ: 0 };
  const { rows } = await store.pool.query<{ stored: number; differ: number }>(
    `SELECT count(e.id)::int AS stored,
       count(e.id) FILTER (WHERE (e.type, e.created_at, e.data)
         IS DISTINCT FROM (i.type, i.created_at::timestamptz, i.data))::int AS differ
     FROM jsonb_to_recordset($2::jsonb) AS i(id text, type text, created_at text, data jsonb)
     LEFT JOIN ${quoteSchema(store.schema)}.events e ON e.source = $1 AND e.id = i.id`,
    [source, JSON.stringify(events)],
  );
  return rows[0] ?? { stored: 0, differ: 0 };
}
