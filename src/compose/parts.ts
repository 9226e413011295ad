import { ServiceClient } from '../api/client.js';
import type { RetryDeps } from '../api/retry.js';
import { RequestBudgets } from '../budget/request-budgets.js';
import type { Config } from '../config/config-type.js';
import { requireService } from '../config/source-config.js';
import { createFeedClient, type FeedClientOptions, type FetchPage } from '../feed/feed-client.js';
import type { Logger } from '../logger.js';
import { toQueueError } from '../queue/pg-queues.js';
import type { Publisher } from '../queue/publisher.js';
import type { Relay, RelayOptions } from '../queue/relay.js';
import { startRelay } from '../queue/relay-loop.js';
import { jobOptionsFor } from '../queue/routes.js';
import { createStore, type Store } from '../store/db.js';
import type { LeaseOptions } from '../store/lease-renewal.js';
import { pgOutbox } from '../store/outbox.js';
import { reserveRequestSlots } from '../store/request-slots.js';
import { type QueueStore, queueStoreFor } from './queue-store.js';

// The composition root: every Postgres pool, BullMQ publisher, outbox relay and client
// of the service that feedsync uses is built here, from the Config, and nowhere else.
// Who reads the Config: a command, a library entry (runWorker, createSync, the webhook
// service) and a composition: this file, the root logger (loggerFor) and, for the
// worker, planWorker (plan-worker.ts). Each builds its parts
// and settings once; everything it calls, the worker's rounds and turns, the health
// server and the relay included, gets the parts and the values it uses (a store, a
// relay, a fetchPage, RoundSettings), never the Config.

/** How a command wants its parts: its pool, its waits for Redis, its relay's hooks. */
export interface PartsShape {
  /** Postgres connections at most. Default: STORE_DEFAULTS.max (store/db.ts). */
  poolMax?: number;
  /** `application_name` in pg_stat_activity. Default: STORE_DEFAULTS.applicationName (store/db.ts). */
  applicationName?: string;
  /** The publisher's longest wait for the queues' store. Default: the publisher's own (queue/redis-publisher.ts, queue/pg-publisher.ts). */
  redisTimeoutMs?: number;
  /** Aborted on SIGTERM: the publisher stops reconnecting to a Redis that fails. */
  stopping?: AbortSignal;
  /** The relay's hooks (metrics) and sweep. */
  relay?: Pick<RelayOptions, 'onPublished' | 'onPublishDelay' | 'sweepMs'>;
}

/** Parts a caller made itself (an embedding, a test): used as they are, and left to it to close. */
export interface GivenParts {
  store?: Store;
  publisher?: Publisher;
  relay?: Relay;
}

/** A command's store, publisher and relay, each made on first use, closed together. */
export interface Parts {
  readonly store: Store;
  /** The queues' store QUEUE_BACKEND names, chosen here once. */
  readonly queues: QueueStore;
  readonly publisher: Publisher;
  /** The outbox relay over the store and the publisher, started on first use. */
  readonly relay: Relay;
  /**
   * With QUEUE_BACKEND=postgres, checks the queues' schema (or migrates it, with
   * `migrate`): a schema not migrated fails (QUEUE_NOT_MIGRATED); a queues' database
   * that does not answer is only logged, since the events are stored all the same and the
   * outbox drains once it answers. Nothing with Redis.
   */
  checkQueues(opts?: { migrate?: boolean }): Promise<void>;
  /** Stops the relay, closes the publisher, then the store: only what was made here. */
  close(): Promise<void>;
}

export function composeParts(
  config: Config,
  logger: Logger,
  shape: PartsShape = {},
  given: GivenParts = {},
): Parts {
  const made: { store?: Store; publisher?: Publisher; relay?: Relay } = {};
  const queues = queueStoreFor(config);
  const parts: Parts = {
    queues,
    get store() {
      if (given.store) return given.store;
      made.store ??= storeFor(config, logger, shape);
      return made.store;
    },
    get publisher() {
      if (given.publisher) return given.publisher;
      made.publisher ??= publisherOn(queues, config, shape);
      return made.publisher;
    },
    get relay() {
      if (given.relay) return given.relay;
      made.relay ??= startRelay({
        outbox: pgOutbox(parts.store),
        publisher: parts.publisher,
        logger,
        ...shape.relay,
      });
      return made.relay;
    },
    async checkQueues({ migrate = false } = {}) {
      const timeoutMs = config.database.connectTimeoutMs;
      try {
        if (migrate) await queues.migrate(timeoutMs);
        else await queues.assertSchema(timeoutMs);
      } catch (err) {
        if ((err as { code?: unknown }).code === 'QUEUE_NOT_MIGRATED') throw err;
        logger.warn(
          { err: toQueueError(err) },
          "the queues' Postgres does not answer: the events are stored, their jobs wait in the outbox",
        );
      }
    },
    async close() {
      await made.relay?.stop();
      await made.publisher?.close();
      await made.store?.close();
    },
  };
  return parts;
}

/** A Postgres pool on DATABASE_URL, for DATABASE_SCHEMA. */
export function storeFor(config: Config, logger: Logger, shape: PartsShape = {}): Store {
  return createStore({
    ...config.database,
    logger,
    ...(shape.poolMax === undefined ? {} : { max: shape.poolMax }),
    ...(shape.applicationName === undefined ? {} : { applicationName: shape.applicationName }),
  });
}

/**
 * A BullMQ publisher, its jobs carrying JOB_ATTEMPTS and JOB_BACKOFF_MS: on REDIS_URL under
 * QUEUE_PREFIX, or with QUEUE_BACKEND=postgres in QUEUE_DATABASE_URL's schema QUEUE_PREFIX
 * (no Redis connection at all then).
 */
export function publisherFor(config: Config, shape: PartsShape = {}): Publisher {
  return publisherOn(queueStoreFor(config), config, shape);
}

function publisherOn(queues: QueueStore, config: Config, shape: PartsShape): Publisher {
  return queues.publisher(jobOptionsFor(config.queues), {
    ...(shape.redisTimeoutMs === undefined ? {} : { timeoutMs: shape.redisTimeoutMs }),
    ...(shape.stopping === undefined ? {} : { stopping: shape.stopping }),
  });
}

/**
 * A client of the service for the source the config describes (its FEED_BASE_URL and
 * key; a usage error without them), with FEED_TIMEOUT_MS and the feed's retry policy.
 * The caller closes it.
 */
export function clientFor(
  config: Config,
  opts: { timeoutMs?: number; retryDeps?: RetryDeps; logger?: Logger } = {},
): ServiceClient {
  return new ServiceClient({
    ...requireService(config),
    timeoutMs: opts.timeoutMs ?? config.feed.timeoutMs,
    maxResponseBytes: config.feed.maxResponseBytes,
    retry: { maxRetries: config.feed.maxRetries, maxRetryWaitMs: config.feed.maxRetryWaitMs },
    ...(opts.retryDeps ? { retryDeps: opts.retryDeps } : {}),
    budget: {
      budgets: budgetsFor(config, opts.logger),
      limits: { share: config.feed.rateShare, maxPerSecond: config.feed.maxRequestsPerSecond },
    },
  });
}

/** The process's request budgets, one per database they are shared through. */
const processBudgets = new Map<string, RequestBudgets>();

/**
 * The request budgets of this process (src/budget/), shared with every replica through
 * DATABASE_URL's request_budgets row of each account. The budgets' own pool (one
 * connection, opened once a budget is in force, never keeping the process alive) is
 * nobody's to close. A reservation that fails (Postgres down, a schema not migrated
 * yet) is logged once, and the pace is then this process's alone.
 */
export function budgetsFor(config: Config, logger?: Logger): RequestBudgets {
  const name = `${config.database.url}\0${config.database.schema}`;
  let budgets = processBudgets.get(name);
  if (!budgets) {
    let store: Store | null = null;
    let warned = false;
    budgets = new RequestBudgets({
      reserve: (account, count, intervalMs) => {
        store ??= createStore({
          ...config.database,
          max: 1,
          applicationName: 'feedsync-budget',
          allowExitOnIdle: true,
        });
        return reserveRequestSlots(store, account, count, intervalMs);
      },
      onReserveFailure: (err) => {
        if (warned) return;
        warned = true;
        logger?.warn(
          { err },
          'the request budget could not be shared through Postgres; this process paces its own requests alone',
        );
      },
    });
    processBudgets.set(name, budgets);
  }
  return budgets;
}

/** Who holds the leases this process takes (host name, HOSTNAME in a pod, and pid, as `status` shows it), and for how long. */
export function leaseOptionsFor(config: Config): LeaseOptions {
  return { holder: `${config.hostName}/${process.pid}`, leaseMs: config.sourceLeaseMs };
}

/** Pages of one source's feed, and the close of the client behind them. */
export interface FeedReader {
  fetchPage: FetchPage;
  /** Waits for the account's request budget ahead of the next page (ServiceClient.awaitBudget). */
  awaitBudget?: (signal?: AbortSignal) => Promise<void>;
  close(): Promise<void>;
}

/**
 * A reader of the source's feed (FEED_PAGE_LIMIT, FEED_LIST_FIELD, FEED_TYPES and the
 * retries of FEED_MAX_RETRIES). Its client is made on the first page asked for, so a
 * command that never pages needs no FEED_BASE_URL.
 */
export function feedReaderFor(
  config: Config,
  opts: {
    /** Events per page. Default FEED_PAGE_LIMIT; 1 for a probe of one id. */
    limit?: number;
    timeoutMs?: number;
    maxRetries?: number;
    retryDeps?: RetryDeps;
    onResponse?: FeedClientOptions['onResponse'];
    /** Where a request budget that cannot be shared through Postgres is said. */
    logger?: Logger;
    waiting?: FeedClientOptions['waiting'];
  } = {},
): FeedReader {
  let made: { client: ServiceClient; feed: FetchPage } | null = null;
  const open = (): { client: ServiceClient; feed: FetchPage } => {
    if (made) return made;
    const client = clientFor(config, {
      ...(opts.timeoutMs === undefined ? {} : { timeoutMs: opts.timeoutMs }),
      ...(opts.logger ? { logger: opts.logger } : {}),
    });
    const feed = createFeedClient({
      client,
      limit: opts.limit ?? config.feed.pageLimit,
      listField: config.feed.listField,
      types: config.feed.types,
      retry: {
        maxRetries: opts.maxRetries ?? config.feed.maxRetries,
        maxRetryWaitMs: config.feed.maxRetryWaitMs,
      },
      ...(opts.retryDeps ? { retryDeps: opts.retryDeps } : {}),
      ...(opts.onResponse ? { onResponse: opts.onResponse } : {}),
      ...(opts.waiting ? { waiting: opts.waiting } : {}),
    });
    made = { client, feed };
    return made;
  };
  return {
    fetchPage: (after, signal, room) => open().feed(after, signal, room),
    awaitBudget: (signal) => open().client.awaitBudget(signal),
    close: async () => made?.client.close(),
  };
}
