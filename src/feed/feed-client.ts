import type { ServiceClient } from '../api/client.js';
import { type RetryDeps, type RetryPolicy, withRetries } from '../api/retry.js';
import { ApiError } from '../errors.js';
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
}

/** A checked feed page and the size of the response it came in (what memory is budgeted by). */
export interface FetchedPage extends FeedPage {
  bytes: number;
}

/** Fetches one checked feed page after a cursor, retrying what is worth retrying. */
export type FetchPage = (after: string | null, signal?: AbortSignal) => Promise<FetchedPage>;

export function createFeedClient(opts: FeedClientOptions): FetchPage {
  const type = feedTypeParam(opts.types);
  const rules = { limit: opts.limit, listField: opts.listField, types: opts.types };
  return async (after, signal) => {
    const raw = await withRetries(
      async () => {
        const started = performance.now();
        try {
          const page = await opts.client.eventsPage({ after, type, limit: opts.limit }, signal);
          opts.onResponse?.({
            status: 200,
            seconds: (performance.now() - started) / 1000,
            bytes: page.bytes,
          });
          return page;
        } catch (err) {
          const status = err instanceof ApiError ? err.status : 0;
          opts.onResponse?.({ status, seconds: (performance.now() - started) / 1000, bytes: 0 });
          throw err;
        }
      },
      opts.retry,
      opts.retryDeps,
      signal ? { signal } : {},
    );
    return { ...parsePage(raw.body, { ...rules, after }), bytes: raw.bytes };
  };
}
