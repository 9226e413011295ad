import type { ServiceClient } from '../api/client.js';
import type { BodyRoom } from '../api/http.js';
import { type RetryDeps, type RetryPolicy, withRetries } from '../api/retry.js';
import { ApiError } from '../errors.js';
import { inSpan, SpanKind } from '../tracing/tracing.js';
import { type FeedPage, feedTypeParam, parsePage } from './page.js';

export interface FeedClientOptions {
  client: Pick<ServiceClient, 'eventsPage'>;
  limit: number;
  listField: string | null;
  types: readonly string[] | null;
  retry: RetryPolicy;
  retryDeps?: RetryDeps;
  /** Told of every request: for the latency histogram and status counts. */
  onResponse?: (info: { status: number; seconds: number; bytes: number }) => void;
  /**
   * Told once of a request still unanswered after `afterMs`: a feed that hangs is not
   * silent for all of FEED_TIMEOUT_MS.
   */
  waiting?: { afterMs: number; tell: (waitedMs: number) => void };
}

/** A checked feed page and the size of the response it came in (what memory is budgeted by). */
export interface FetchedPage extends FeedPage {
  bytes: number;
}

/**
 * Fetches one checked feed page after a cursor, retrying what is worth retrying; `room`
 * takes the answer's bytes as they are read (sync/byte-budget.ts).
 */
export type FetchPage = (after: string | null, signal?: AbortSignal, room?: BodyRoom) => Promise<FetchedPage>;

export function createFeedClient(opts: FeedClientOptions): FetchPage {
  const type = feedTypeParam(opts.types);
  const rules = { limit: opts.limit, listField: opts.listField, types: opts.types };
  return (after, signal, room) =>
    inSpan(
      'feed page',
      { 'http.request.method': 'GET' },
      async (span) => {
        let attempts = 0;
        const raw = await withRetries(
          async () => {
            const started = performance.now();
            attempts++;
            span.setAttribute('feedsync.feed.attempts', attempts);
            const { waiting } = opts;
            const slow = waiting
              ? setTimeout(() => waiting.tell(waiting.afterMs), waiting.afterMs)
              : undefined;
            try {
              const page = await opts.client.eventsPage({ after, type, limit: opts.limit }, signal, room);
              span.setAttribute('http.response.status_code', 200);
              opts.onResponse?.({
                status: 200,
                seconds: (performance.now() - started) / 1000,
                bytes: page.bytes,
              });
              return page;
            } catch (err) {
              // A page read and then refused (not JSON) holds nothing a retry would not take again.
              room?.giveBack();
              const status = err instanceof ApiError ? err.status : 0;
              if (status > 0) span.setAttribute('http.response.status_code', status);
              opts.onResponse?.({ status, seconds: (performance.now() - started) / 1000, bytes: 0 });
              throw err;
            } finally {
              clearTimeout(slow);
            }
          },
          opts.retry,
          opts.retryDeps,
          signal ? { signal } : {},
        ).catch((err: unknown) => {
          throw after === null ? err : (unknownCursor(err, after) ?? err);
        });
        const page = parsePage(raw.body, { ...rules, after }, raw.rawItems);
        span.setAttributes({
          'feedsync.page.bytes': raw.bytes,
          'feedsync.page.events': page.events.length,
          'feedsync.page.quarantined': page.quarantine.length,
        });
        return { ...page, bytes: raw.bytes };
      },
      { kind: SpanKind.CLIENT },
    );
}

/**
 * The feed's refusal of `after` (400 or 422, or a 404 that names it): the cursor points
 * at an event the feed no longer knows, and every run would fail the same way. Exit 2,
 * as a type filter that differs from the cursor's: an operator moves the cursor.
 * Null for any other error.
 */
function unknownCursor(err: unknown, after: string): ApiError | null {
  if (!(err instanceof ApiError) || err.code === 'UNKNOWN_CURSOR') return null;
  const said = `${err.serviceCode ?? ''} ${err.serviceMessage ?? ''}`;
  const refusesAfter =
    err.status === 400 || err.status === 422 || (err.status === 404 && /after|event/i.test(said));
  // A refusal that names something else (a type the service does not take) is not about the cursor.
  if (!refusesAfter || (said.trim() !== '' && !/after|event/i.test(said))) return null;
  return new ApiError(
    `the feed no longer knows the cursor's event ${after.slice(0, 200)} (HTTP ${err.status}` +
      `${err.serviceMessage ? `: ${err.serviceMessage}` : ''}); retrying cannot help. This is another feed ` +
      "when FEED_API_KEY is another account's key or the simulator was restarted since: then put the " +
      "source's own key back, or give this feed a FEED_SOURCE of its own (a restarted simulator: a fresh " +
      'DATABASE_SCHEMA). Only when it is the same feed (its events past the retention): move the cursor to an ' +
      'event the feed knows with "feedsync cursor set <event-id>", or start over with "feedsync cursor reset" ' +
      '(stored events are de-duplicated); then "feedsync reconcile --from <event-id>" stores what the gap held',
    {
      code: 'UNKNOWN_CURSOR',
      status: err.status,
      serviceCode: err.serviceCode,
      serviceMessage: err.serviceMessage,
      cause: err,
      exitCode: 2,
    },
  );
}
