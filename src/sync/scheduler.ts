import { createHash } from 'node:crypto';
import { defaultSleep } from '../api/retry.js';
import type { Logger } from '../logger.js';
import { type RunResult, runFailed } from './sync.js';
import { maxBackoffMs } from './watch.js';

/** One source's one-source run (Sync.runOnce), as the scheduler sees it. */
export interface SourceRunner {
  readonly source: string;
  runOnce(signal: AbortSignal): Promise<RunResult>;
}

/** How one turn of one source ended: a result (caught up, locked elsewhere, stopped…) or what it threw. */
export type Outcome =
  | { readonly source: string; readonly ok: true; readonly result: RunResult }
  | { readonly source: string; readonly ok: false; readonly error: unknown };

/**
 * Where in the list of sources a replica starts: a hash of its identity (host name and
 * pid), so that replicas starting together reach for different sources first.
 */
export function startIndex(identity: string, count: number): number {
  if (count <= 1) return 0;
  return createHash('sha256').update(identity).digest().readUInt32BE(0) % count;
}

/** The list rotated to begin at `start`. */
export function rotate<T>(list: readonly T[], start: number): T[] {
  return [...list.slice(start), ...list.slice(0, start)];
}

/** A run that throws becomes an outcome: one source's failure never reaches another's. */
async function turn(runner: SourceRunner, signal: AbortSignal): Promise<Outcome> {
  try {
    return { source: runner.source, ok: true, result: await runner.runOnce(signal) };
  } catch (error) {
    return { source: runner.source, ok: false, error };
  }
}

export interface EachOnceOptions {
  /** In the order to try them (already rotated). */
  runners: readonly SourceRunner[];
  concurrency: number;
  /** Aborted by SIGTERM: runs in flight stop at their next commit, no new one starts. */
  signal: AbortSignal;
  onOutcome?: (outcome: Outcome) => void;
}

/**
 * `sync --once` over many sources: every source once, at most `concurrency` at a
 * time, each to caught-up (or locked elsewhere, or failed). Sources not reached
 * before the signal aborted have no outcome.
 */
export async function runEachOnce(opts: EachOnceOptions): Promise<Outcome[]> {
  const queue = [...opts.runners];
  const outcomes: Outcome[] = [];
  const lane = async (): Promise<void> => {
    for (let next = queue.shift(); next && !opts.signal.aborted; next = queue.shift()) {
      const outcome = await turn(next, opts.signal);
      outcomes.push(outcome);
      opts.onOutcome?.(outcome);
    }
  };
  await Promise.all(Array.from({ length: Math.min(opts.concurrency, queue.length) }, lane));
  return outcomes;
}

export interface WatchSourcesOptions extends EachOnceOptions {
  /** The pause between the end of a source's turn and its next one. */
  intervalMs: number;
  logger: Logger;
  /** Called whenever the loop shows it is alive. */
  onBeat?: () => void;
  now?: () => number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/**
 * `sync --watch` over many sources. Each source has a due time; whenever a lane is
 * free the source due longest (ties in list order) takes it. After a turn the
 * source is due again one interval later; a failed turn backs that source off alone,
 * doubling up to ten intervals, while the other sources keep their pace. Nothing here
 * ends the loop but the signal: a rejected key or a bad filter is one source's
 * failure, logged on each of its turns.
 */
export async function watchSources(opts: WatchSourcesOptions): Promise<void> {
  const log = opts.logger.child({ module: 'scheduler' });
  const now = opts.now ?? Date.now;
  const sleep = opts.sleep ?? defaultSleep;
  const order = new Map(opts.runners.map((r, i) => [r.source, i]));
  const due = new Map(opts.runners.map((r) => [r.source, now()]));
  const failures = new Map<string, number>();
  const inFlight = new Map<string, Promise<void>>();
  let wake = new AbortController();

  const settle = (outcome: Outcome): void => {
    const failed = outcome.ok ? runFailed(outcome.result) : true;
    const count = failed ? (failures.get(outcome.source) ?? 0) + 1 : 0;
    failures.set(outcome.source, count);
    let waitMs = opts.intervalMs;
    if (!outcome.ok) {
      waitMs = Math.min(maxBackoffMs(opts.intervalMs), opts.intervalMs * 2 ** (count - 1));
      log.error(
        { err: outcome.error, source: outcome.source, failures: count, retryInMs: waitMs },
        'source run failed; backing this source off',
      );
    }
    due.set(outcome.source, now() + waitMs);
    opts.onOutcome?.(outcome);
  };

  while (!opts.signal.aborted) {
    opts.onBeat?.();
    const t = now();
    const ready = opts.runners
      .filter((r) => !inFlight.has(r.source) && due.get(r.source)! <= t)
      .sort((a, b) => due.get(a.source)! - due.get(b.source)! || order.get(a.source)! - order.get(b.source)!);
    for (const runner of ready.slice(0, Math.max(0, opts.concurrency - inFlight.size))) {
      const running = turn(runner, opts.signal).then((outcome) => {
        inFlight.delete(runner.source);
        settle(outcome);
        wake.abort();
      });
      inFlight.set(runner.source, running);
    }
    // Sleep until the next source is due or a lane frees up, at most one interval (a beat).
    let nextDue = t + opts.intervalMs;
    for (const [source, at] of due) if (!inFlight.has(source) && at < nextDue) nextDue = at;
    const waitMs = inFlight.size >= opts.concurrency ? opts.intervalMs : Math.max(0, nextDue - now());
    await sleep(waitMs, AbortSignal.any([opts.signal, wake.signal])).catch(() => {});
    if (wake.signal.aborted) wake = new AbortController();
  }
  await Promise.all(inFlight.values());
}
