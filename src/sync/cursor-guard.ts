import { PageError } from '../errors.js';
import { clip, type FeedPage } from '../feed/page.js';

/**
 * How many of the latest event ids a run remembers: the pages fetched ahead are not
 * stored yet, so a next_after that names one of their events is caught here.
 */
const RECENT_IDS = 10_000;
/**
 * How many of the latest cursors a run remembers. A run that pages for hours must not
 * hold every next_after it sent (each up to MAX_ID_LENGTH characters): with 10,000
 * ids and 1,000 cursors of 500 characters at most, a run's memory of past pages stays
 * under about 6 MB however long it pages. A loop longer than that window is still
 * stopped: by the stored events (a next_after that is not its page's own event), and
 * for a once run by SYNC_ONCE_MAX_MS.
 */
const RECENT_CURSORS = 1_000;

/** Checks one page's next_after; throws PageError. */
export type CursorCheck = (page: FeedPage, after: string | null) => Promise<void>;

/**
 * Checks each page's next_after before the page is kept: one that does not move, or
 * moves back, would be saved as the cursor, and every later run would read the same
 * events again, or stand still reporting "caught up". Such a page fails the run and
 * the cursor stays before it.
 *
 * Ids are opaque, so "back" means something already read: a cursor this run sent, an
 * event of this run's latest pages, or (when next_after is not an event of the page
 * itself) an event the source has stored, looked up in Postgres: once per page whose
 * next_after is not its own event, which a feed that names its last event never costs.
 */
export function cursorGuard(start: string | null, isStored: (id: string) => Promise<boolean>): CursorCheck {
  // The latest cursors, in the order sent; the set answers "sent before?", the list drops the oldest.
  const cursors = new Set<string | null>([start]);
  const sent: (string | null)[] = [start];
  // The latest pages' ids, oldest page first: looked through only for a next_after that
  // is not an event of its own page (rare), so keeping them costs nothing per event.
  const recent: string[][] = [];
  let recentIds = 0;
  const isRecent = (id: string): boolean => recent.some((ids) => ids.includes(id));
  return async (page, after) => {
    const next = page.nextAfter;
    const ids = page.events.map((e) => e.id);
    // The normal end: an empty page answers with the after it was sent.
    if (next === after && ids.length + page.filteredOut === 0) return;
    if (next === after) {
      throw new PageError(
        `next_after equals the after sent (${clip(String(after))}) on a page of ${page.size} events: the cursor would not move`,
        'CURSOR_STUCK',
      );
    }
    const at = next === null ? -1 : ids.indexOf(next);
    const back =
      cursors.has(next) ||
      (at >= 0 && newAfter(ids, at)) ||
      (next !== null && at < 0 && (isRecent(next) || (await isStored(next))));
    if (back)
      throw new PageError(
        `next_after ${clip(String(next))} points back to events already read`,
        'CURSOR_LOOP',
      );
    cursors.add(next);
    sent.push(next);
    if (sent.length > RECENT_CURSORS) cursors.delete(sent.shift()!);
    recent.push(ids);
    recentIds += ids.length;
    while (recentIds - recent[0]!.length >= RECENT_IDS) recentIds -= recent.shift()!.length;
  };
}

/** Whether an event after position `at` of the page is not a repeat of one up to it: it would be read again. */
function newAfter(ids: readonly string[], at: number): boolean {
  if (at === ids.length - 1) return false;
  const upTo = new Set(ids.slice(0, at + 1));
  return ids.slice(at + 1).some((id) => !upTo.has(id));
}
