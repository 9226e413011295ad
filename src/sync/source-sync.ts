import type { RetryDeps } from '../api/retry.js';
import type { FeedReader } from '../compose/parts.js';
import type { SourceSettings } from '../compose/plan-worker.js';
import { ConfigError } from '../errors.js';
import type { FetchPage } from '../feed/feed-client.js';
import { unknownEventReason } from '../feed/known-event.js';
import type { Logger } from '../logger.js';
import type { Relay } from '../queue/relay.js';
import { linkedAbort } from '../sleep.js';
import type { Applier, ApplyBatch, ApplyResult } from '../store/applier.js';
import { ensureCursor, getCursor, isStored } from '../store/cursor.js';
import type { Store } from '../store/db.js';
import { storedDiffering } from '../store/foreign-feed.js';
import type { SourceLease } from '../store/lease-renewal.js';
import { inSpan } from '../tracing/tracing.js';
import type { ByteBudget } from './byte-budget.js';
import { type CatchUpOptions, type CatchUpResult, type CommitInfo, catchUp } from './catch-up.js';
import { checkedFetch } from './cursor-check.js';
import { checkCursor, checkReconcileStart, checkSchemaOf } from './source-checks.js';
import { type VerifyOptions, type VerifyResult, verifySource } from './verify.js';

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

export type { SourceSettings } from '../compose/plan-worker.js';

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
  return !outboxSettled(result);
}

/**
 * The one rule of "drained": a turn kept nothing back in the outbox when the relay
 * published what it committed, or when a signal stopped it (a stopped turn owes no drain:
 * the next run drains).
 */
export function outboxSettled(result: Pick<RunResult, 'status' | 'drained'>): boolean {
  return result.drained || result.status === 'stopped';
}

/** The turns of one source. */
export interface SourceSync {
  /**
   * One turn under a lease taken elsewhere (the scheduler's): pages until caught up,
   * the lease lost, the signal aborted or the limit reached. Its statements are its
   * commits: the cursor comes with the lease, the success is recorded when the caller
   * gives the lease back, and the outbox is drained and pruned per worker, not per turn.
   * Leaves the lease to its caller, and the schema check too.
   */
  runHeld(lease: SourceLease, signal: AbortSignal, limit?: AbortSignal): Promise<RunResult>;
  /** Re-reads the feed from `from` without moving the cursor; stores and enqueues only what was missing. */
  reconcile(from: string | null, signal?: AbortSignal): Promise<CatchUpResult>;
  /**
   * Re-reads the feed up to the cursor and compares it with the store (`feedsync verify`);
   * with `repair`, stores and hands over what is missing as reconcile does.
   */
  verify(opts: VerifyOptions): Promise<VerifyResult>;
  /** Refuses an outdated schema, or migrates it with `autoMigrate`; once per SourceSync. */
  checkSchema(): Promise<void>;
}

/** The parts a source's turns use, made by the composition root. */
export interface SourceSyncDeps {
  settings: SourceSettings;
  store: Store;
  /** The outbox relay; shared by every source of a worker. */
  relay: Relay;
  applier: Applier;
  /** A reader of the source's feed for one turn (or one reconcile), closed at its end. */
  openFeed: () => FeedReader;
  /** Bound to the source already (`logger.child({ source })`): the turns' lines name it once. */
  logger: Logger;
  hooks?: SyncHooks;
  autoMigrate?: boolean;
  /**
   * The worker's budget of the feed's bytes, shared by every lane (byte-budget.ts):
   * memory bounded per process, not per lane. Default: each catch-up a budget of its own.
   */
  pageBudget?: ByteBudget;
}

/** The turns of one source over parts made elsewhere: the once run's, the watch's and reconcile's alike. */
export function createSourceSync(deps: SourceSyncDeps): SourceSync {
  const { settings, store } = deps;
  const log = deps.logger.child({ module: 'sync' });
  let schemaChecked = false;

  const checkSchema = async (): Promise<void> => {
    if (schemaChecked) return;
    await checkSchemaOf(store, deps.autoMigrate === true, log);
    schemaChecked = true;
  };

  // A turn is a trace of its own: its feed requests and commits are its children.
  const runHeld = (lease: SourceLease, signal: AbortSignal, limit?: AbortSignal): Promise<RunResult> =>
    inSpan('source turn', { 'feedsync.source': settings.source }, async (span) => {
      const result = await runTurn(deps, log, lease, signal, limit);
      span.setAttributes({
        'feedsync.turn.status': result.status,
        'feedsync.pages': result.pages,
        'feedsync.events.stored': result.stored,
        'feedsync.events.duplicate': result.duplicates,
        'feedsync.outbox.drained': result.drained,
      });
      return result;
    });

  const reconcile = async (from: string | null, signal: AbortSignal = new AbortController().signal) => {
    await checkSchema();
    await checkReconcileStart(store, settings, from);
    const feed = deps.openFeed();
    try {
      return await reconcileWith(deps, feed.fetchPage, from, signal);
    } finally {
      await feed.close();
    }
  };

  const verify = async (opts: VerifyOptions): Promise<VerifyResult> => {
    await checkSchema();
    const feed = deps.openFeed();
    try {
      return await verifySource(
        {
          source: settings.source,
          store,
          eventsRetentionDays: settings.eventsRetentionDays,
          catchUp: catchUpOf(deps),
          storeMissing: reconcileStore(deps),
          checkFrom: (from, signal) => checkFeedKnows(feed.fetchPage, from, signal),
          drain: () => deps.relay.drain(),
        },
        feed.fetchPage,
        opts,
      );
    } finally {
      await feed.close();
    }
  };

  return { runHeld, reconcile, verify, checkSchema };
}

/** What a turn and a reconcile page alike: the source's store, its budget, the relay offered each commit. */
function catchUpOf(
  deps: SourceSyncDeps,
): Pick<CatchUpOptions, 'source' | 'isStored' | 'maxPageBytes' | 'budget' | 'onCommit'> {
  const { settings, store, relay, hooks } = deps;
  return {
    source: settings.source,
    isStored: (id) => isStored(store, settings.source, id),
    maxPageBytes: settings.maxPageBytes,
    ...(deps.pageBudget ? { budget: deps.pageBudget } : {}),
    onCommit: (info) => {
      relay.offer(info.result.outbox);
      hooks?.onCommit?.(info);
    },
  };
}

async function runTurn(
  deps: SourceSyncDeps,
  log: Logger,
  lease: SourceLease,
  signal: AbortSignal,
  limit?: AbortSignal,
): Promise<RunResult> {
  const { settings, store, relay, applier, hooks } = deps;
  const started = performance.now();
  // One signal for the turn: SIGTERM or the lease lost stop it alike.
  const turn = linkedAbort(signal, lease.signal);
  hooks?.onLeaseChange?.(true);
  const turnFeed = deps.openFeed();
  let result: CatchUpResult;
  try {
    // The claim read the cursor with the lease; a source's first turn makes it.
    const cursor = lease.cursor ?? {
      ...(await ensureCursor(store, settings.source, settings.types, settings.keyKind)),
      check: null,
    };
    await checkCursor(store, settings, cursor);
    result = await catchUp({
      ...catchUpOf(deps),
      start: cursor.afterId,
      fetchPage: checkedFetch(turnFeed.fetchPage, settings.source, cursor, (events) =>
        storedDiffering(store, settings.source, events),
      ),
      ...(turnFeed.awaitBudget ? { awaitBudget: turnFeed.awaitBudget } : {}),
      // Not ahead of Redis: what the relay is offered it publishes from memory.
      apply: async (batch) => {
        await relay.ready();
        return applier.apply({ ...batch, leaseToken: lease.token });
      },
      signal: turn.signal,
      ...(limit ? { limit } : {}),
    });
    // Stopped by the lease, not by SIGTERM: another worker has the source now.
    if (result.status === 'stopped' && lease.lost && !signal.aborted) result.status = 'lease-lost';
  } finally {
    turn.dispose();
    hooks?.onLeaseChange?.(false);
    // The feed's client lives for one turn: memory and sockets follow the turns in flight, not the sources.
    await turnFeed.close();
  }
  await logTurnEnd(store, log, lease, result);
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
}

/** Says why a turn ended early, when another worker or a command took the source from it. */
async function logTurnEnd(
  store: Store,
  log: Logger,
  lease: SourceLease,
  result: CatchUpResult,
): Promise<void> {
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
    // This turn held the lease, so a worker that also takes it cannot have done it.
    const moved = await getCursor(store, lease.source);
    log.info(
      { cursor: moved?.afterId ?? null, movedAt: moved?.updatedAt },
      'the cursor was moved outside this run (by "feedsync cursor set" or "cursor reset", or by a worker ' +
        'of a version before leases, during a rolling update); this run stopped, its last batch rolled ' +
        'back, and the next run reads from the cursor as it is now',
    );
  }
}

/** An id the feed does not know is a usage error, said before anything is read. */
async function checkFeedKnows(fetchPage: FetchPage, from: string, signal: AbortSignal): Promise<void> {
  const unknown = await unknownEventReason(fetchPage, from, signal);
  if (unknown !== null) {
    throw new ConfigError(
      `--from ${from}: the feed does not know this event id (${unknown}); nothing was read`,
      'UNKNOWN_EVENT_ID',
    );
  }
}

/** How reconcile (and verify --repair) store a batch: never moving the cursor, enqueueing only what was new. */
function reconcileStore(deps: SourceSyncDeps): (batch: ApplyBatch) => Promise<ApplyResult> {
  const { relay, applier } = deps;
  // No cursor in the batch: reconcile never moves it.
  return async ({ cursor: _kept, ...batch }) => {
    await relay.ready();
    return applier.apply(batch);
  };
}

async function reconcileWith(
  deps: SourceSyncDeps,
  fetchPage: FetchPage,
  from: string | null,
  signal: AbortSignal,
): Promise<CatchUpResult> {
  if (from !== null) await checkFeedKnows(fetchPage, from, signal);
  const result = await catchUp({
    ...catchUpOf(deps),
    start: from,
    fetchPage,
    apply: reconcileStore(deps),
    signal,
  });
  await deps.relay.drain();
  return result;
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
