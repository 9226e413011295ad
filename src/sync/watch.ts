import { defaultSleep } from '../api/retry.js';
import { ConfigError, FeedsyncError } from '../errors.js';
import type { Logger } from '../logger.js';
import { type RunResult, runFailed, type Sync } from './sync.js';

export interface WatchOptions {
  sync: Pick<Sync, 'runOnce'>;
  intervalMs: number;
  signal: AbortSignal;
  logger: Logger;
  /** Called whenever the loop shows it is alive: each run's start and end. */
  onBeat?: () => void;
  /** Every run that returned, failed ones (outbox not drained) included. */
  onRun?: (result: RunResult) => void;
  /** Every run that threw and that the loop goes on after (it backs off first). */
  onFailure?: (err: unknown) => void;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/** The longest the loop sleeps between two runs: ten intervals, after many failures in a row. */
export function maxBackoffMs(intervalMs: number): number {
  return intervalMs * 10;
}

/**
 * The watch loop, a small state machine: run, then sleep for the interval (an
 * abortable sleep), until the signal aborts. A failed run backs off, doubling up
 * to ten intervals; only errors that waiting cannot fix (configuration, a
 * rejected key) end the loop.
 */
export async function watch(opts: WatchOptions): Promise<void> {
  const log = opts.logger.child({ module: 'watch' });
  const sleep = opts.sleep ?? defaultSleep;
  let failures = 0;
  while (!opts.signal.aborted) {
    opts.onBeat?.();
    let waitMs = opts.intervalMs;
    try {
      const result = await opts.sync.runOnce(opts.signal);
      opts.onRun?.(result);
      failures = runFailed(result) ? failures + 1 : 0;
    } catch (err) {
      if (err instanceof ConfigError || (err instanceof FeedsyncError && err.exitCode === 3)) throw err;
      failures++;
      opts.onFailure?.(err);
      waitMs = Math.min(maxBackoffMs(opts.intervalMs), opts.intervalMs * 2 ** (failures - 1));
      log.error({ err, failures, retryInMs: waitMs }, 'sync run failed; backing off');
    }
    opts.onBeat?.();
    await sleep(waitMs, opts.signal).catch(() => {});
  }
}
