import { createHash } from 'node:crypto';
import type { ServiceEvent } from '../api/types.js';
import { FeedsyncError } from '../errors.js';
import type { FetchedPage, FetchPage } from '../feed/feed-client.js';
import type { CursorEvent } from '../store/cursor-move.js';
import { EXIT_FOREIGN_FEED } from '../store/foreign-feed.js';

/**
 * A restarted simulator, or another account's key, serves the same ids with other
 * content. A page that is mostly such events is caught where it is applied
 * (store/foreign-feed.ts), but a turn that starts after its cursor reads only what is
 * new, and would store a new feed's events under the old source. So each turn's first
 * request starts one event earlier, after the event before the cursor's (remembered in
 * the cursor row at the commit that moved it, read with the lease: no statement of its
 * own), and the cursor's event must come back as it was stored. It is taken off the
 * page before the turn sees it: the turn pages as if it had read after the cursor.
 */

/** A digest of an event's content: its type, instant and data, whatever the order of the data's keys. */
export function eventDigest(event: ServiceEvent): string {
  const sorted = (_key: string, value: unknown): unknown =>
    value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype
      ? Object.fromEntries(Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : value;
  const text = JSON.stringify([event.type, Date.parse(event.created_at), event.data], sorted);
  return createHash('sha256').update(text).digest('hex');
}

/**
 * What a commit that moves the cursor to `next` records for the next turn: the event
 * before `next` among `events` (or `prev`, where the cursor stood) and `next`'s digest.
 * Null when `next` is not the last event of the batch (filtered out, quarantined).
 */
export function cursorEventOf(
  events: readonly ServiceEvent[],
  prev: string | null,
  next: string,
): CursorEvent | null {
  const last = events.at(-1);
  if (last?.id !== next) return null;
  return { before: events.at(-2)?.id ?? prev, digest: eventDigest(last) };
}

/**
 * `fetchPage` for a turn that starts at `cursor`: its first request, when the cursor
 * has a check, reads from the event before the cursor's and checks that event; any
 * other request goes as it is. A feed that does not know the cursor is asked for its
 * first page, compared with what is stored (`storedDiffering`) before the refusal is
 * left as it is (UNKNOWN_CURSOR).
 */
export function checkedFetch(
  fetchPage: FetchPage,
  source: string,
  cursor: { afterId: string | null; check: CursorEvent | null },
  storedDiffering: (events: readonly ServiceEvent[]) => Promise<{ stored: number; differ: number }>,
): FetchPage {
  let first = true;
  return async (after, signal, room) => {
    const checking = first && after === cursor.afterId && after !== null;
    first = false;
    if (!checking) return fetchPage(after, signal, room);
    try {
      if (cursor.check === null) return await fetchPage(after, signal, room);
      const page = await fetchPage(cursor.check.before, signal, room).catch((err: unknown) =>
        // The event before it unknown: the cursor's own request says what the feed knows.
        isUnknownCursor(err) ? null : Promise.reject(err),
      );
      if (page === null) return await fetchPage(after, signal, room);
      const rest = checkedPage(page, source, after, cursor.check.digest);
      // Only the cursor's event on a page that is not the last (a limit of 1): read on from it.
      return rest.events.length === 0 && !rest.last ? await fetchPage(after, signal, room) : rest;
    } catch (err) {
      if (!isUnknownCursor(err)) throw err;
      const start = await fetchPage(null, signal, room);
      const { stored, differ } = await storedDiffering(start.events);
      if (differ > 0 && differ * 2 > stored) {
        throw foreignCursorError(
          source,
          `the feed does not know the cursor's event ${clip(after)}, and serves ${differ} of the ${stored} stored ` +
            'events of its first page with other content',
        );
      }
      throw err;
    }
  };
}

/** The page after the event before the cursor's, with the cursor's event checked and taken off. */
function checkedPage(page: FetchedPage, source: string, cursorId: string, digest: string): FetchedPage {
  const at = page.events.findIndex((e) => e.id === cursorId);
  if (at < 0) {
    throw foreignCursorError(
      source,
      `the feed does not serve the cursor's event ${clip(cursorId)} after the event stored before it`,
    );
  }
  if (eventDigest(page.events[at]!) !== digest) {
    throw foreignCursorError(
      source,
      `the feed serves the cursor's event ${clip(cursorId)} with other content than stored`,
    );
  }
  return { ...page, events: page.events.slice(at + 1) };
}

function isUnknownCursor(err: unknown): boolean {
  return err instanceof FeedsyncError && err.code === 'UNKNOWN_CURSOR';
}

const clip = (id: string): string => (id.length > 200 ? `${id.slice(0, 200)}…` : id);

function foreignCursorError(source: string, found: string): FeedsyncError {
  return new FeedsyncError(
    `source ${source}: ${found}: this is not the feed the source was synced from (a simulator restarted ` +
      "since, or another account's key in FEED_API_KEY); nothing was stored and the cursor did not move. " +
      "Put the source's own key back, or give this feed a FEED_SOURCE of its own (against a restarted " +
      'simulator: a fresh DATABASE_SCHEMA)',
    { code: 'FOREIGN_FEED', exitCode: EXIT_FOREIGN_FEED },
  );
}
