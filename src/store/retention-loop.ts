import type { Logger } from '../logger.js';
import type { Store } from './db.js';
import { pruneOutbox } from './outbox.js';
import { pruneAfterRun } from './retention.js';

/** The retention loop's default, in one place: RetentionLoopOptions names it. */
const RETENTION_LOOP_DEFAULTS = Object.freeze({
  /**
   * Milliseconds, 5 minutes: as often as the CronJob of the manifests runs `sync --once`,
   * each of which prunes when it ends, so every way of running feedsync prunes alike.
   */
  intervalMs: 300_000,
});

export interface RetentionLoopOptions {
  store: Store;
  logger: Logger;
  /** EVENTS_RETENTION_DAYS; null: events are kept, only published outbox rows are pruned. */
  days: number | null;
  /** OUTBOX_RETENTION_HOURS. */
  outboxHours: number;
  /** Between two rounds, in ms. Default: RETENTION_LOOP_DEFAULTS.intervalMs. */
  intervalMs?: number;
}

export interface RetentionLoop {
  /** Stops after the round in hand (its current batch). */
  stop(): Promise<void>;
}

/**
 * One round of pruning: published outbox rows past OUTBOX_RETENTION_HOURS, then, with
 * EVENTS_RETENTION_DAYS, old events (for at most RETENTION_DEFAULTS.budgetMs). Logged, never thrown: the next
 * round tries again.
 */
export async function pruneRound(
  opts: Omit<RetentionLoopOptions, 'intervalMs'> & { signal: AbortSignal },
): Promise<void> {
  try {
    await pruneOutbox(opts.store, opts.outboxHours);
  } catch (err) {
    opts.logger
      .child({ module: 'retention' })
      .warn({ err }, 'pruning published outbox rows failed; the next round tries again');
  }
  if (opts.days !== null && !opts.signal.aborted) {
    await pruneAfterRun(opts.store, {
      days: opts.days,
      outboxHours: opts.outboxHours,
      signal: opts.signal,
      logger: opts.logger,
    });
  }
}

/**
 * Pruning on a timer, the first round at start: for `serve-webhooks`, and for the
 * replicas of `sync --watch` (one round a replica, not one a turn). A failed round is
 * logged and the next one tries again.
 */
export function startRetentionLoop(opts: RetentionLoopOptions): RetentionLoop {
  const intervalMs = opts.intervalMs ?? RETENTION_LOOP_DEFAULTS.intervalMs;
  const stopping = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let round: Promise<void> = Promise.resolve();

  const once = (): Promise<void> => pruneRound({ ...opts, signal: stopping.signal });
  const schedule = (delay: number) => {
    if (stopping.signal.aborted) return;
    timer = setTimeout(() => {
      round = once().finally(() => schedule(intervalMs));
    }, delay);
    timer.unref();
  };
  schedule(0);
  return {
    async stop() {
      stopping.abort();
      clearTimeout(timer);
      await round;
    },
  };
}
