import { logRetries, type RetryDeps } from '../api/retry.js';
import { type FeedReader, feedReaderFor, leaseOptionsFor } from '../compose/parts.js';
import type { Config } from '../config/config-type.js';
import { keyKindOf } from '../config/key-kind.js';
import type { Logger } from '../logger.js';
import { routeFor } from '../queue/routes.js';
import { type Applier, createApplier } from '../store/applier.js';
import type { Store } from '../store/db.js';
import type { SourceSettings, SyncHooks } from './source-sync.js';

// What a source's turns get from the Config, read here by the worker's composition
// (worker-parts.ts) so that the turns themselves never see it.

/** The settings of the source the config describes (`configForSource` picks one of a sources file). */
export function sourceSettings(config: Config): SourceSettings {
  return {
    source: config.feed.source,
    types: config.feed.types,
    keyKind: keyKindOf(config.feed.apiKey),
    maxPageBytes: config.feed.maxResponseBytes,
    lease: leaseOptionsFor(config),
    eventsRetentionDays: config.eventsRetentionDays,
  };
}

/** How long a feed request goes unanswered before the log says it is waiting, in ms. */
const FEED_WAIT_NOTICE_MS = 5_000;

/**
 * Readers of the feed of the source the config describes, one per turn: its retries
 * logged and told to the hooks, its responses timed by them.
 */
export function feedOf(
  config: Config,
  logger: Logger,
  hooks: SyncHooks,
  retryDeps: RetryDeps = {},
): () => FeedReader {
  const log = logger.child({ module: 'sync' });
  const logRetry = logRetries(log);
  const timeoutMs = config.feed.timeoutMs;
  // A request still unanswered after a few seconds is said, once: the wait may be all of FEED_TIMEOUT_MS.
  const waiting = {
    afterMs: Math.min(FEED_WAIT_NOTICE_MS, Math.round(timeoutMs / 2)),
    tell: (waitedMs: number) =>
      log.info(
        { waitedMs, timeoutMs },
        `waiting for the feed: no answer after ${waitedMs / 1000} s; the request is given up at FEED_TIMEOUT_MS (${timeoutMs} ms)`,
      ),
  };
  return () =>
    feedReaderFor(config, {
      waiting,
      retryDeps: {
        ...retryDeps,
        onRetry: (info) => {
          logRetry(info);
          hooks.onRetry?.(info);
        },
      },
      ...(hooks.onFeedResponse ? { onResponse: hooks.onFeedResponse } : {}),
      logger,
    });
}

/** The page applier for the config's queues, its transactions bounded below SOURCE_LEASE_MS. */
export function applierFor(config: Config, store: Store): Applier {
  return createApplier(store, routeFor(config.queues), { leaseMs: config.sourceLeaseMs });
}
