import type { Logger } from '../logger.js';
import type { Store } from './db.js';
import { pruneOutbox } from './outbox.js';
import { pruneAfterRun } from './retention.js';

export interface RetentionLoopOptions {
  store: Store;
  logger: Logger;
  /** EVENTS_RETENTION_DAYS; null: events are kept, only published outbox rows are pruned. */
  days: number | null;
  /** OUTBOX_RETENTION_HOURS. */
  outboxHours: number;
  /** Between two rounds. Default 5 minutes. */
  intervalMs?: number;
}

export interface RetentionLoop {
  /** Stops after the round in hand (its current batch). */
  stop(): Promise<void>;
}

/**
 * Pruning for a process that never runs a sync (`serve-webhooks` alone): the same
 * rounds a caught-up run ends with, on a timer, the first one at start. A failed
 * round is logged and the next one tries again.
 */
export function startRetentionLoop(opts: RetentionLoopOptions): RetentionLoop {
  const intervalMs = opts.intervalMs ?? 300_000;
  const stopping = new AbortController();
  const log = opts.logger.child({ module: 'retention' });
  let timer: NodeJS.Timeout | undefined;
  let round: Promise<void> = Promise.resolve();

  const once = async (): Promise<void> => {
    try {
      await pruneOutbox(opts.store, opts.outboxHours);
    } catch (err) {
      log.warn({ err }, 'pruning published outbox rows failed; the next round tries again');
    }
    if (opts.days !== null && !stopping.signal.aborted) {
      await pruneAfterRun(opts.store, {
        days: opts.days,
        outboxHours: opts.outboxHours,
        signal: stopping.signal,
        logger: opts.logger,
      });
    }
  };
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
