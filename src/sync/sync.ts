import { logRetries, type RetryDeps } from '../api/retry.js';
import { composeParts, type FeedReader, feedReaderFor, leaseOptionsFor } from '../compose/parts.js';
import type { Config } from '../config/config.js';
import { type KeyKind, keyKindOf } from '../config/key-kind.js';
import { ConfigError } from '../errors.js';
import type { FetchPage } from '../feed/feed-client.js';
import { unknownEventReason } from '../feed/known-event.js';
import { type Logger, loggerFor } from '../logger.js';
import type { Publisher } from '../queue/publisher.js';
import type { Relay } from '../queue/relay.js';
import { routeFor } from '../queue/routes.js';
import { shellQuote } from '../shell-quote.js';
import { type Applier, createApplier } from '../store/applier.js';
import { ensureCursor, getCursor, isStored, recordKeyKind } from '../store/cursor.js';
import type { Store } from '../store/db.js';
import { type LeaseOptions, type SourceLease, takeLease } from '../store/lease.js';
import { migrate, schemaState } from '../store/migrate.js';
import { pruneOutbox } from '../store/outbox.js';
import { pruneAfterRun } from '../store/retention.js';
import { assertEventWithinRetention } from '../store/retention-guard.js';
import { inSpan } from '../tracing/tracing.js';
import type { ByteBudget } from './byte-budget.js';
import { type CatchUpResult, type CommitInfo, catchUp } from './catch-up.js';
import { linkedAbort } from './signals.js';

/** Hooks for progress output and metrics; every one is optional. */
export interface SyncHooks {
  onCommit?: (info: CommitInfo) => void;
  onFeedResponse?: (info: { status: number; seconds: number; bytes: number }) => void;
  onRetry?: NonNullable<RetryDeps['onRetry']>;
  onPublished?: (queue: string, count: number) => void;
  /** One job's delay from its row's commit to its publication. */
  onPublishDelay?: (seconds: number) => void;
  /** A turn of the source began (true) or ended (false) under its lease. */
  onLeaseChange?: (held: boolean) => void;
}

export interface SyncOptions {
  /** Default: a logger at the config's LOG_LEVEL that scrubs its secrets (`loggerFor(config)`). */
  logger?: Logger;
  hooks?: SyncHooks;
  /** Apply pending migrations instead of refusing to run (`sync --migrate`). */
  autoMigrate?: boolean;
  /** Replaces the feed fetcher (tests, benchmarks). */
  fetchPage?: FetchPage;
  /** Replaces the store and publisher made from the config; the caller then closes them. */
  store?: Store;
  publisher?: Publisher;
  /** Replaces the relay made here, to share one among the runs of many sources; the caller then stops it. */
  relay?: Relay;
  /** The clock and sleep of the feed client's retries. */
  retryDeps?: RetryDeps;
}

export type RunStatus = CatchUpResult['status'] | 'held-elsewhere';

export interface RunResult extends Omit<CatchUpResult, 'status'> {
  status: RunStatus;
  /** False when the outbox could not be drained (Redis down): the events are stored, the next run drains. */
  drained: boolean;
  /** What kept the outbox from being drained (Redis, or Postgres under the relay); undefined when drained. */
  drainError?: unknown;
  durationMs: number;
}

/**
 * A run that failed: a once run ends it with exit 1 and a watch loop counts it. A run
 * stopped by SIGTERM did not fail (the next run drains); one that could not drain the
 * outbox did (Redis down: the events are stored, consumers do not get them yet).
 */
export function runFailed(result: RunResult): boolean {
  return result.status !== 'stopped' && !result.drained;
}

/** The runs of one source. */
export interface SourceSync {
  /**
   * Takes the source's lease (status 'held-elsewhere' when another worker holds it), pages until
   * caught up (or for SYNC_ONCE_MAX_MS at most: 'limit-reached'), gives the lease back
   * and drains the outbox: one CronJob run.
   */
  runOnce(signal?: AbortSignal): Promise<RunResult>;
  /**
   * One turn under a lease taken elsewhere (the scheduler's claim): pages until caught
   * up, the lease lost, the signal aborted or the limit reached. Its statements are its
   * commits: the cursor comes with the lease, the success is recorded when the caller
   * gives the lease back, and the outbox is drained and pruned per worker, not per turn.
   * Leaves the lease to its caller, and the schema check too.
   */
  runHeld(lease: SourceLease, signal: AbortSignal, limit?: AbortSignal): Promise<RunResult>;
  /** Re-reads the feed from `from` without moving the cursor; stores and enqueues only what was missing. */
  reconcile(from: string | null, signal?: AbortSignal): Promise<CatchUpResult>;
  /** Refuses an outdated schema, or migrates it with `autoMigrate`; once per Sync. runOnce calls it too. */
  checkSchema(): Promise<void>;
}

export interface Sync extends SourceSync {
  readonly store: Store;
  readonly publisher: Publisher;
  readonly relay: Relay;
  close(): Promise<void>;
}

/** What a source's runs need to know of the configuration. */
export interface SourceSettings {
  /** The cursor key (FEED_SOURCE, or a source of FEED_SOURCES_FILE). */
  source: string;
  /** Its FEED_TYPES: what its cursor was built with. */
  types: readonly string[] | null;
  /** The kind of its API key (test or live; null: neither), which its cursor remembers. */
  keyKind: KeyKind | null;
  /** FEED_MAX_RESPONSE_BYTES: the budget of the pages in memory. */
  maxPageBytes: number;
  /** SYNC_INTERVAL_MS: when the source falls due after a once run gives its lease back. */
  intervalMs: number;
  /** SYNC_ONCE_MAX_MS: how long `runOnce` pages before it stops short of the feed's end. */
  onceMaxMs: number;
  /** Who holds the lease, and for how long (SOURCE_LEASE_MS). */
  lease: LeaseOptions;
  /** EVENTS_RETENTION_DAYS and OUTBOX_RETENTION_HOURS. */
  eventsRetentionDays: number | null;
  outboxRetentionHours: number;
}

/** The settings of the source the config describes (`configForSource` picks one of a sources file). */
export function sourceSettings(config: Config): SourceSettings {
  return {
    source: config.feed.source,
    types: config.feed.types,
    keyKind: keyKindOf(config.feed.apiKey),
    maxPageBytes: config.feed.maxResponseBytes,
    intervalMs: config.syncIntervalMs,
    onceMaxMs: config.syncOnceMaxMs,
    lease: leaseOptionsFor(config),
    eventsRetentionDays: config.eventsRetentionDays,
    outboxRetentionHours: config.queues.outboxRetentionHours,
  };
}

/** The parts a source's runs use, made by the composition root (or by `createSync`). */
export interface SourceSyncDeps {
  settings: SourceSettings;
  store: Store;
  /** The outbox relay; shared by every source of a worker. */
  relay: Relay;
  applier: Applier;
  /** A reader of the source's feed for one turn (or one reconcile), closed at its end. */
  openFeed: () => FeedReader;
  /** Bound to the source already (`logger.child({ source })`): the runs' lines name it once. */
  logger: Logger;
  hooks?: SyncHooks;
  autoMigrate?: boolean;
  /**
   * The worker's budget of feed response bytes, shared by every lane (catch-up.ts):
   * memory bounded per process, not per lane. Default: each catch-up a budget of its own.
   */
  pageBudget?: ByteBudget;
}

/**
 * The sync worker, for embedding: builds its store, publisher and relay from the config
 * (or takes those given), then the runs of the config's FEED_SOURCE over them.
 */
export function createSync(config: Config, opts: SyncOptions = {}): Sync {
  const logger = opts.logger ?? loggerFor(config);
  const hooks = opts.hooks ?? {};
  const parts = composeParts(
    config,
    logger,
    {
      relay: {
        ...(hooks.onPublished ? { onPublished: hooks.onPublished } : {}),
        ...(hooks.onPublishDelay ? { onPublishDelay: hooks.onPublishDelay } : {}),
      },
    },
    opts,
  );
  const { store, relay } = parts;
  const { fetchPage } = opts;
  // As the worker's turns have it: every line of the source's runs names it once.
  const sourceLogger = logger.child({ source: config.feed.source });
  const source = createSourceSync({
    settings: sourceSettings(config),
    store,
    relay,
    applier: applierFor(config, store),
    openFeed: fetchPage
      ? () => ({ fetchPage, close: async () => {} })
      : feedOf(config, sourceLogger, hooks, opts.retryDeps),
    logger: sourceLogger,
    hooks,
    ...(opts.autoMigrate === undefined ? {} : { autoMigrate: opts.autoMigrate }),
  });
  return { ...source, store, publisher: parts.publisher, relay, close: () => parts.close() };
}

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
  const logRetry = logRetries(logger.child({ module: 'sync' }));
  return () =>
    feedReaderFor(config, {
      retryDeps: {
        ...retryDeps,
        onRetry: (info) => {
          logRetry(info);
          hooks.onRetry?.(info);
        },
      },
      ...(hooks.onFeedResponse ? { onResponse: hooks.onFeedResponse } : {}),
    });
}

/** The page applier for the config's queues, its transactions bounded below SOURCE_LEASE_MS. */
export function applierFor(config: Config, store: Store): Applier {
  return createApplier(store, routeFor(config.queues), { leaseMs: config.sourceLeaseMs });
}

/** The runs of one source over parts made elsewhere: the scheduler's turns and `createSync` alike. */
export function createSourceSync(deps: SourceSyncDeps): SourceSync {
  const { settings, store, relay, applier, logger } = deps;
  const { source } = settings;
  const log = logger.child({ module: 'sync' });
  const hooks = deps.hooks ?? {};
  let schemaChecked = false;

  const checkSchema = async (): Promise<void> => {
    if (schemaChecked) return;
    const state = await schemaState(store);
    if (state.pending.length > 0) {
      if (!deps.autoMigrate && state.current === null) {
        // Often a misspelt DATABASE_SCHEMA: migrating would make a second, empty one.
        throw new ConfigError(
          `the schema "${store.schema}" (DATABASE_SCHEMA) has no feedsync tables yet: check DATABASE_SCHEMA ` +
            '(a misspelt name is a new, empty schema), or run "feedsync migrate" to create them there',
          'SCHEMA_MISSING',
        );
      }
      if (!deps.autoMigrate) {
        throw new ConfigError(
          `the schema "${store.schema}" is not up to date (pending: ${state.pending.join(', ')}); run "feedsync migrate" or "feedsync sync --migrate"`,
          'SCHEMA_OUTDATED',
        );
      }
      const { applied } = await migrate(store);
      log.info({ applied }, 'migrated');
    }
    schemaChecked = true;
  };

  const runOnce = async (signal: AbortSignal = new AbortController().signal): Promise<RunResult> => {
    const started = performance.now();
    await checkSchema();
    const lease = await takeLease(store, source, settings.lease);
    if (!lease) {
      log.info('another worker holds the lease of this source; nothing to do');
      return heldElsewhere(performance.now() - started);
    }
    let failed = true;
    let succeeded = false;
    try {
      // Rows an earlier run committed but did not publish go first.
      relay.kick();
      const { drainError: _turns, ...result } = await runHeld(
        lease,
        signal,
        AbortSignal.timeout(settings.onceMaxMs),
      );
      const drainError = result.status === 'stopped' ? undefined : await drainAndPrune(result.status, signal);
      const drained = result.status !== 'stopped' && drainError === null;
      failed = runFailed({ ...result, drained });
      succeeded = result.status === 'caught-up';
      return {
        ...result,
        drained,
        ...(drainError ? { drainError } : {}),
        durationMs: performance.now() - started,
      };
    } finally {
      await lease.release({ dueInMs: settings.intervalMs, failed, succeeded });
    }
  };

  /**
   * A once run's end: waits for the outbox to be published, prunes published rows and,
   * after a catch-up, old events. Null when drained, else what kept the outbox back.
   */
  const drainAndPrune = async (status: RunStatus, signal: AbortSignal): Promise<unknown> => {
    try {
      await relay.drain();
      await pruneOutbox(store, settings.outboxRetentionHours);
      if (settings.eventsRetentionDays !== null && status === 'caught-up') {
        await pruneAfterRun(store, {
          days: settings.eventsRetentionDays,
          outboxHours: settings.outboxRetentionHours,
          signal,
          logger,
        });
      }
      return null;
    } catch (err) {
      if (err instanceof ConfigError) throw err;
      log.error({ err }, 'the outbox could not be drained; the events are stored and the next run drains it');
      return err;
    }
  };

  // A turn is a trace of its own: its feed requests and commits are its children.
  const runHeld = (lease: SourceLease, signal: AbortSignal, limit?: AbortSignal): Promise<RunResult> =>
    inSpan('source turn', { 'feedsync.source': source }, async (span) => {
      const result = await runTurn(lease, signal, limit);
      span.setAttributes({
        'feedsync.turn.status': result.status,
        'feedsync.pages': result.pages,
        'feedsync.events.stored': result.stored,
        'feedsync.events.duplicate': result.duplicates,
        'feedsync.outbox.drained': result.drained,
      });
      return result;
    });

  const runTurn = async (
    lease: SourceLease,
    signal: AbortSignal,
    limit?: AbortSignal,
  ): Promise<RunResult> => {
    const started = performance.now();
    // One signal for the turn: SIGTERM or the lease lost stop it alike.
    const turn = linkedAbort(signal, lease.signal);
    hooks.onLeaseChange?.(true);
    const turnFeed = deps.openFeed();
    let result: CatchUpResult;
    try {
      // The claim read the cursor with the lease; a source's first turn makes it.
      const cursor = lease.cursor ?? (await ensureCursor(store, source, settings.types, settings.keyKind));
      checkTypes(source, cursor.types, settings.types);
      checkKeyKind(source, cursor.keyKind, settings.keyKind);
      if (cursor.keyKind === null && settings.keyKind !== null)
        await recordKeyKind(store, source, settings.keyKind);
      result = await catchUp({
        source,
        start: cursor.afterId,
        fetchPage: turnFeed.fetchPage,
        // Not ahead of Redis: what the relay is offered it publishes from memory.
        apply: async (batch) => {
          await relay.ready();
          return applier.apply({ ...batch, leaseToken: lease.token });
        },
        isStored: (id) => isStored(store, source, id),
        maxPageBytes: settings.maxPageBytes,
        ...(deps.pageBudget ? { budget: deps.pageBudget } : {}),
        signal: turn.signal,
        ...(limit ? { limit } : {}),
        onCommit: (info) => {
          relay.offer(info.result.outbox);
          hooks.onCommit?.(info);
        },
      });
      // Stopped by the lease, not by SIGTERM: another worker has the source now.
      if (result.status === 'stopped' && lease.lost && !signal.aborted) result.status = 'lease-lost';
    } finally {
      turn.dispose();
      hooks.onLeaseChange?.(false);
      // The feed's client lives for one turn: memory and sockets follow the turns in flight, not the sources.
      await turnFeed.close();
    }
    if (result.status === 'lease-lost') {
      log.warn(
        {
          token: lease.token,
          reason:
            lease.signal.reason instanceof Error ? lease.signal.reason.message : 'its renewal found it taken',
        },
        'this worker lost the lease of the source (frozen or cut off from Postgres for longer than ' +
          'SOURCE_LEASE_MS, or its turn stalled: see reason); nothing more of this turn was committed, ' +
          'and the next holder goes on from the cursor',
      );
    }
    if (result.status === 'cursor-conflict') {
      // This run held the lease, so a worker that also takes it cannot have done it.
      const moved = await getCursor(store, source);
      log.info(
        { cursor: moved?.afterId ?? null, movedAt: moved?.updatedAt },
        'the cursor was moved outside this run (by "feedsync cursor set" or "cursor reset", or by a worker ' +
          'of a version before leases, during a rolling update); this run stopped, its last batch rolled ' +
          'back, and the next run reads from the cursor as it is now',
      );
    }
    // The turn does not wait for its rows' jobs: the relay publishes them from memory, and
    // the outbox keeps what it could not. A relay failing now (Redis down) fails the turn.
    const failing = result.status === 'stopped' ? null : relay.lastError;
    const drained = result.status !== 'stopped' && failing === null;
    return {
      ...result,
      drained,
      ...(failing === null ? {} : { drainError: failing }),
      durationMs: performance.now() - started,
    };
  };

  const reconcile = async (from: string | null, signal: AbortSignal = new AbortController().signal) => {
    await checkSchema();
    await checkReconcileStart(store, settings, from);
    const feed = deps.openFeed();
    try {
      return await reconcileWith(feed.fetchPage, from, signal);
    } finally {
      await feed.close();
    }
  };

  const reconcileWith = async (fetchPage: FetchPage, from: string | null, signal: AbortSignal) => {
    // An id the feed does not know is a usage error, said before anything is read.
    const unknown = from === null ? null : await unknownEventReason(fetchPage, from, signal);
    if (unknown !== null) {
      throw new ConfigError(
        `--from ${from}: the feed does not know this event id (${unknown}); nothing was read`,
        'UNKNOWN_EVENT_ID',
      );
    }
    const result = await catchUp({
      source,
      start: from,
      fetchPage,
      // No cursor in the batch: reconcile never moves it.
      apply: async ({ cursor: _kept, ...batch }) => {
        await relay.ready();
        return applier.apply(batch);
      },
      isStored: (id) => isStored(store, source, id),
      maxPageBytes: settings.maxPageBytes,
      ...(deps.pageBudget ? { budget: deps.pageBudget } : {}),
      signal,
      onCommit: (info) => {
        relay.offer(info.result.outbox);
        hooks.onCommit?.(info);
      },
    });
    await relay.drain();
    return result;
  };

  return { runOnce, runHeld, reconcile, checkSchema };
}

/** The result for a source whose lease another worker holds: nothing done, nothing to drain. */
export function heldElsewhere(durationMs = 0): RunResult {
  return {
    status: 'held-elsewhere',
    cursor: null,
    pages: 0,
    stored: 0,
    duplicates: 0,
    quarantined: 0,
    drained: true,
    durationMs,
  };
}

/** Under a retention, reconcile starts from a stored event inside it: the feed's start would bring back pruned events. */
async function checkReconcileStart(
  store: Store,
  settings: SourceSettings,
  from: string | null,
): Promise<void> {
  const days = settings.eventsRetentionDays;
  if (days === null) return;
  if (from === null) {
    throw new ConfigError(
      `reconcile: with EVENTS_RETENTION_DAYS (${days}) set, give --from <event-id> (a stored event inside the retention): ` +
        'from the start of the feed, events already pruned would be stored and enqueued again as new',
      'BEFORE_RETENTION',
    );
  }
  await assertEventWithinRetention(store, settings.source, from, '--from', days);
}

/**
 * A key of the other kind than the cursor's is another account: its feed would be
 * mixed into this source's events and records. Refuse, and say how to mean it.
 */
function checkKeyKind(source: string, stored: KeyKind | null, wanted: KeyKind | null): void {
  if (stored === null || wanted === null || stored === wanted) return;
  throw new ConfigError(
    `FEED_API_KEY is a ${wanted} key, but the cursor of source "${source}" was built with a ${stored} key: ` +
      `another account. Put the ${stored} key back, or give this account a FEED_SOURCE of its own; to switch ` +
      `this source on purpose, "feedsync cursor reset --source ${shellQuote(source)} --allow-key-change" ` +
      '(its feed is read from the start; events stored under the same ids with other content stop the run)',
    'KEY_KIND_CHANGED',
  );
}

/** A filter that differs from the cursor's would skip or mix events: refuse, and say how to reset. */
function checkTypes(
  source: string,
  stored: readonly string[] | null,
  wanted: readonly string[] | null,
): void {
  const a = stored ? [...stored].sort().join(',') : '*';
  const b = wanted ? [...wanted].sort().join(',') : '*';
  if (a === b) return;
  throw new ConfigError(
    `FEED_TYPES (${b === '*' ? 'all types' : b}) differs from the filter the cursor of source "${source}" was built with (${a === '*' ? 'all types' : a}). ` +
      `Set FEED_TYPES back, or start this source over with "feedsync cursor reset --source ${shellQuote(source)}" (events are re-read and de-duplicated), or use another FEED_SOURCE.`,
    'TYPES_MISMATCH',
  );
}
