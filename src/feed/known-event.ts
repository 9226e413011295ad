import { ServiceClient } from '../api/client.js';
import type { RetryDeps } from '../api/retry.js';
import { type Config, requireService } from '../config.js';
import { ApiError, AuthError } from '../errors.js';
import { createFeedClient, type FetchPage } from './feed-client.js';

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

/**
 * A one-event feed reader made from the config, for checks that ask the feed about
 * one id (`cursor set`, `doctor`). Close it after.
 */
export function probeFeed(
  config: Config,
  opts: { timeoutMs?: number; maxRetries?: number; retryDeps?: RetryDeps } = {},
): { fetchPage: FetchPage; close: () => Promise<void> } {
  const client = new ServiceClient({
    ...requireService(config),
    timeoutMs: opts.timeoutMs ?? config.feed.timeoutMs,
    maxResponseBytes: config.feed.maxResponseBytes,
  });
  const fetchPage = createFeedClient({
    client,
    limit: 1,
    listField: config.feed.listField,
    types: config.feed.types,
    retry: {
      maxRetries: opts.maxRetries ?? config.feed.maxRetries,
      maxRetryWaitMs: config.feed.maxRetryWaitMs,
    },
    ...(opts.retryDeps ? { retryDeps: opts.retryDeps } : {}),
  });
  return { fetchPage, close: () => client.close() };
}
