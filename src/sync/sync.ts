import type { RetryDeps } from '../api/retry.js';
import { planWorker } from '../compose/plan-worker.js';
import type { Config } from '../config/config-type.js';
import type { FetchPage } from '../feed/feed-client.js';
import type { Logger } from '../logger.js';
import type { Publisher } from '../queue/publisher.js';
import type { Relay } from '../queue/relay.js';
import type { Store } from '../store/db.js';
import type { RunResult, SourceSync, SyncHooks } from './source-sync.js';
import { Worker, type WorkerResult } from './worker.js';

export type { RunResult, RunStatus, SyncHooks } from './source-sync.js';

/** A once run's result: its source's turn, and the jobs the run published. */
export interface OnceResult extends RunResult {
  /** Jobs the relay published during the run: the turn's, and rows an earlier run left. */
  published: number;
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

/** The runs of the config's FEED_SOURCE, for an application that embeds one source. */
export interface Sync extends Pick<SourceSync, 'reconcile' | 'verify'> {
  /**
   * `feedsync sync --once` for this one source (runWorker's once round): takes the
   * source's lease (status 'held-elsewhere' when another worker holds it), pages until
   * caught up (or for SYNC_ONCE_MAX_MS at most: 'limit-reached'), gives the lease back
   * with its next due time, then hands the outbox over and prunes: one CronJob run. A
   * turn that throws rejects with its error, which the lease row keeps for `status`.
   */
  runOnce(signal?: AbortSignal): Promise<OnceResult>;
  readonly store: Store;
  readonly publisher: Publisher;
  readonly relay: Relay;
  close(): Promise<void>;
}

/**
 * The sync worker, for embedding: one Worker (worker.ts) of the config's FEED_SOURCE,
 * built once over the store, publisher and relay given, or made from the config.
 */
export function createSync(config: Config, opts: SyncOptions = {}): Sync {
  const source = config.feed.source;
  const plan = planWorker(config, {
    mode: 'once',
    migrate: opts.autoMigrate === true,
    sources: [source],
    logger: opts.logger,
  });
  const hooks = opts.hooks ?? {};
  // The relay outlives the runs: what it publishes during one counts into its result.
  let run: { published: number } | null = null;
  const worker = new Worker(plan, {
    hooks: {
      onCommit: (_source, info) => hooks.onCommit?.(info),
      onFeedResponse: (_source, info) => hooks.onFeedResponse?.(info),
      onRetry: (_source, info) => hooks.onRetry?.(info),
      onLeaseChange: (_source, held) => hooks.onLeaseChange?.(held),
      onPublished: (queue, count) => {
        hooks.onPublished?.(queue, count);
        if (run) run.published += count;
      },
      onPublishDelay: (seconds) => hooks.onPublishDelay?.(seconds),
    },
    given: {
      ...(opts.store ? { store: opts.store } : {}),
      ...(opts.publisher ? { publisher: opts.publisher } : {}),
      ...(opts.relay ? { relay: opts.relay } : {}),
    },
    ...(opts.fetchPage ? { fetchPage: opts.fetchPage } : {}),
    ...(opts.retryDeps ? { retryDeps: opts.retryDeps } : {}),
  });
  const { store, publisher, relay } = worker.parts;
  return {
    reconcile: (from, signal) => worker.syncOf(source).reconcile(from, signal),
    verify: (verifyOpts) => worker.syncOf(source).verify(verifyOpts),
    async runOnce(signal = new AbortController().signal) {
      const started = performance.now();
      const counting = { published: 0 };
      run = counting;
      try {
        const round = await worker.runOnce(signal);
        return { ...runResultOf(round, performance.now() - started), published: counting.published };
      } finally {
        if (run === counting) run = null;
      }
    },
    store,
    publisher,
    relay,
    close: () => worker.close(),
  };
}

/**
 * The one source's result of a once round: its turn's, drained only if the round
 * handed the outbox over too. A round stopped before the turn began is 'stopped'.
 */
function runResultOf(round: WorkerResult, durationMs: number): RunResult {
  const outcome = round.outcomes[0];
  if (outcome && !outcome.ok) throw outcome.error;
  const turn: RunResult = outcome?.result ?? {
    status: 'stopped',
    cursor: null,
    pages: 0,
    stored: 0,
    duplicates: 0,
    quarantined: 0,
    drained: false,
    durationMs: 0,
  };
  const { drainError: _turns, ...result } = turn;
  const drained = turn.drained && round.handedOver;
  const drainError = drained ? undefined : (round.handOverError ?? turn.drainError);
  return {
    ...result,
    drained,
    ...(drainError === undefined || drainError === null ? {} : { drainError }),
    durationMs,
  };
}
