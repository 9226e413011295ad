import type { RetryDeps } from '../api/retry.js';
import { composeParts } from '../compose/parts.js';
import type { Config } from '../config/config-type.js';
import type { FetchPage } from '../feed/feed-client.js';
import { type Logger, loggerFor } from '../logger.js';
import type { Publisher } from '../queue/publisher.js';
import type { Relay } from '../queue/relay.js';
import type { Store } from '../store/db.js';
import type { RunResult, SourceSync, SyncHooks } from './source-sync.js';
import { runRound } from './worker.js';
import { type WorkerParts, type WorkerResult, workerParts } from './worker-parts.js';

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
export interface Sync extends SourceSync {
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
 * The sync worker, for embedding: builds its store, publisher and relay from the config
 * (or takes those given), then runs the config's FEED_SOURCE over them with the
 * worker's own parts (worker-parts.ts).
 */
export function createSync(config: Config, opts: SyncOptions = {}): Sync {
  const logger = opts.logger ?? loggerFor(config);
  const hooks = opts.hooks ?? {};
  // The relay outlives the runs: what it publishes counts into the run in flight (its
  // metrics and summary line, its result), besides the caller's hooks.
  let run: { metrics: WorkerParts['metrics']; published: number } | null = null;
  const parts = composeParts(
    config,
    logger,
    {
      relay: {
        onPublished: (queue, count) => {
          hooks.onPublished?.(queue, count);
          if (run === null) return;
          run.metrics.onPublished(queue, count);
          run.published += count;
        },
        onPublishDelay: (seconds) => {
          hooks.onPublishDelay?.(seconds);
          run?.metrics.onPublishDelay(seconds);
        },
      },
    },
    opts,
  );
  const { store, publisher, relay } = parts;
  const source = config.feed.source;
  const migrate = opts.autoMigrate === true;
  // A worker of this one source over these parts, its limit and signal those of one run.
  const worker = (signal: AbortSignal) =>
    workerParts(
      config,
      logger,
      { mode: 'once', migrate, signal },
      {
        given: { store, publisher, relay },
        sources: [source],
        hooks,
        ...(opts.fetchPage ? { fetchPage: opts.fetchPage } : {}),
        ...(opts.retryDeps ? { retryDeps: opts.retryDeps } : {}),
      },
    );
  const runs = worker(new AbortController().signal).syncOf(source);
  // The schemas are checked by the first run that gets past them, not again by every run.
  let checked = false;
  return {
    ...runs,
    async runOnce(signal = new AbortController().signal) {
      const started = performance.now();
      const w = worker(signal);
      const counting = { metrics: w.metrics, published: 0 };
      run = counting;
      try {
        const round = await runRound(w, { mode: 'once', migrate, checked });
        checked = true;
        return { ...runResultOf(round, performance.now() - started), published: counting.published };
      } finally {
        if (run === counting) run = null;
      }
    },
    store,
    publisher,
    relay,
    close: () => parts.close(),
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
