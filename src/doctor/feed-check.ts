import { ServiceClient } from '../api/client.js';
import type { Config } from '../config.js';
import { ApiError, AuthError, PageError } from '../errors.js';
import { feedTypeParam, parsePage } from '../feed/page.js';
import { type Check, check } from './report.js';

/** One `GET /events?limit=1` with the configured key, when FEED_BASE_URL is set. */
export async function feedCheck(config: Config, timeoutMs: number): Promise<Check> {
  const { baseUrl, apiKey } = config.feed;
  if (baseUrl === null) {
    return check('feed', 'skip', 'FEED_BASE_URL is not set: "sync" cannot run (serve-webhooks can)');
  }
  if (apiKey === null) {
    return check(
      'feed',
      'fail',
      'FEED_BASE_URL is set but no API key is',
      'set FEED_API_KEY, or FEED_API_KEY_FILE to a file that holds it',
    );
  }
  const client = new ServiceClient({
    baseUrl,
    apiKey,
    timeoutMs: Math.min(timeoutMs, config.feed.timeoutMs),
    maxResponseBytes: config.feed.maxResponseBytes,
  });
  const started = performance.now();
  try {
    const page = await client.eventsPage({ after: null, type: feedTypeParam(config.feed.types), limit: 1 });
    parsePage(page.body, {
      after: null,
      limit: 1,
      listField: config.feed.listField,
      types: config.feed.types,
    });
    const ms = Math.round(performance.now() - started);
    return check('feed', 'ok', `${baseUrl}/events answered in ${ms} ms; the key is accepted`);
  } catch (err) {
    return failure(baseUrl, err);
  } finally {
    await client.close();
  }
}

function failure(baseUrl: string, err: unknown): Check {
  if (err instanceof AuthError) {
    return check(
      'feed',
      'fail',
      `the service rejected the key (HTTP ${err.status})`,
      'check FEED_API_KEY (or FEED_API_KEY_FILE): a key of this account, <service>_live_… in production',
    );
  }
  if (err instanceof PageError) {
    return check(
      'feed',
      'fail',
      `${baseUrl}/events answered, but: ${err.message}`,
      'check FEED_BASE_URL points at the service (it ends in /api), and FEED_LIST_FIELD if the list has another name',
    );
  }
  if (err instanceof ApiError && err.status === 429) {
    return check(
      'feed',
      'warn',
      `${baseUrl}/events is rate limited right now (HTTP 429)`,
      'sync waits and retries by itself; if it persists, run fewer workers or a longer SYNC_INTERVAL_MS',
    );
  }
  if (err instanceof ApiError && err.status === 0) {
    return check(
      'feed',
      'fail',
      `cannot reach ${baseUrl}: ${err.message}`,
      'check FEED_BASE_URL, DNS, proxies and firewalls between this host and the service',
    );
  }
  return check(
    'feed',
    'fail',
    `${baseUrl}/events failed: ${(err as Error).message}`,
    'check FEED_BASE_URL, and FEED_TYPES (full type names such as email.delivered)',
  );
}
