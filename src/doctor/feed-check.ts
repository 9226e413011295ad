import { clientFor, feedReaderFor } from '../compose/parts.js';
import type { Config } from '../config/config-type.js';
import { ApiError, AuthError, PageError } from '../errors.js';
import { unknownEventReason } from '../feed/known-event.js';
import { feedTypeParam, parsePage } from '../feed/page.js';
import { webhookScheme } from '../webhooks/webhook-scheme.js';
import { type Check, check } from './report.js';

/** Which source a feed check is of: `feed` for the one source of FEED_*, `feed <source>` for each of a file. */
export interface FeedCheckOf {
  name: string;
  /** Where the key comes from, for the fix of a rejected key. */
  keyHint: string;
}

const ONE_SOURCE: FeedCheckOf = { name: 'feed', keyHint: 'FEED_API_KEY (or FEED_API_KEY_FILE)' };

/** One `GET /events?limit=1` with the configured key, when FEED_BASE_URL is set. */
export async function feedCheck(
  config: Config,
  timeoutMs: number,
  of: FeedCheckOf = ONE_SOURCE,
): Promise<Check> {
  const { baseUrl, apiKey } = config.feed;
  const { name } = of;
  if (baseUrl === null) {
    return check(
      name,
      'fail',
      'FEED_BASE_URL is not set: sync, reconcile and cursor set cannot run',
      'set FEED_BASE_URL (the service\'s API, ending in /api); for a deployment that only runs serve-webhooks, run "feedsync doctor --receiver"',
    );
  }
  if (apiKey === null) {
    return check(
      name,
      'fail',
      'FEED_BASE_URL is set but no API key is',
      'set FEED_API_KEY, or FEED_API_KEY_FILE to a file that holds it',
    );
  }
  const client = clientFor(config, { timeoutMs: Math.min(timeoutMs, config.feed.timeoutMs) });
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
    return check(name, 'ok', `${baseUrl}/events answered in ${ms} ms; the key is accepted`);
  } catch (err) {
    return failure(baseUrl, err, of);
  } finally {
    await client.close();
  }
}

function failure(baseUrl: string, err: unknown, { name, keyHint }: FeedCheckOf): Check {
  if (err instanceof AuthError) {
    return check(
      name,
      'fail',
      `the service rejected the key (HTTP ${err.status})`,
      `check ${keyHint}: a key of this account, <service>_live_… in production`,
    );
  }
  if (err instanceof PageError) {
    return check(
      name,
      'fail',
      `${baseUrl}/events answered, but: ${err.message}`,
      'check FEED_BASE_URL points at the service (it ends in /api), and FEED_LIST_FIELD if the list has another name',
    );
  }
  if (err instanceof ApiError && err.status === 429) {
    return check(
      name,
      'warn',
      `${baseUrl}/events is rate limited right now (HTTP 429)`,
      'sync waits and retries by itself; if it persists, run fewer workers or a longer SYNC_INTERVAL_MS',
    );
  }
  if (err instanceof ApiError && err.status === 0) {
    return check(
      name,
      'fail',
      `cannot reach ${baseUrl}: ${err.message}`,
      'check FEED_BASE_URL, DNS, proxies and firewalls between this host and the service',
    );
  }
  return check(
    name,
    'fail',
    `${baseUrl}/events failed: ${(err as Error).message}`,
    'check FEED_BASE_URL, and FEED_TYPES (full type names such as email.delivered)',
  );
}

/** For `doctor --receiver`: serve-webhooks needs a signing secret, not the feed. */
export function receiverCheck(config: Config): Check {
  const n = config.webhooks.secrets.length;
  if (n === 0) {
    return check(
      'webhook-secret',
      'fail',
      'WEBHOOK_SECRET is not set: serve-webhooks refuses to start',
      'set WEBHOOK_SECRET (or WEBHOOK_SECRET_FILE) to the signing secret "feedsync webhooks create" printed',
    );
  }
  try {
    webhookScheme(config.webhooks.scheme, config.webhooks.secrets);
  } catch (err) {
    return check(
      'webhook-secret',
      'fail',
      (err as Error).message,
      'give WEBHOOK_SECRET the whsec_ secrets the sender shows, or set WEBHOOK_SCHEME=service for Service-Signature',
    );
  }
  return check(
    'webhook-secret',
    'ok',
    `${n} signing secret${n === 1 ? '' : 's'} set (several during a rotation), WEBHOOK_SCHEME=${config.webhooks.scheme}`,
  );
}

/**
 * Whether the feed serves a page after `id` (the stored cursor): null when it
 * does, else why not. An answer that says nothing of the id (a network error, a
 * refused key) is left to the feed check and counts as known here.
 */
export async function feedKnowsId(config: Config, id: string, timeoutMs: number): Promise<string | null> {
  if (config.feed.baseUrl === null || config.feed.apiKey === null) return null;
  const probe = feedReaderFor(config, {
    limit: 1,
    timeoutMs: Math.min(timeoutMs, config.feed.timeoutMs),
    maxRetries: 0,
  });
  try {
    return await unknownEventReason(probe.fetchPage, id);
  } catch {
    return null;
  } finally {
    await probe.close();
  }
}
