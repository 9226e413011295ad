import { ApiError, AuthError } from '../errors.js';
import type { FetchPage } from './feed-client.js';

/**
 * Why the feed refuses `after=<id>`, or null when it serves a page after it. The
 * service answers a client error (400 `unknown_event_id`, 404, 422) for an id it
 * does not know; a cursor on such an id would fail every run. Other failures (the
 * key, the network, a 5xx after its retries) are thrown: they say nothing of the id.
 */
export async function unknownEventReason(
  fetchPage: FetchPage,
  id: string,
  signal?: AbortSignal,
): Promise<string | null> {
  try {
    await fetchPage(id, signal);
    return null;
  } catch (err) {
    if (err instanceof AuthError || !(err instanceof ApiError)) throw err;
    if (err.status === 400 || err.status === 404 || err.status === 422) {
      return err.serviceMessage ?? `HTTP ${err.status}`;
    }
    throw err;
  }
}
