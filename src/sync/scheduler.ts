import { maxBackoffMs } from '../config/backoff.js';
import type { Logger } from '../logger.js';
import { defaultSleep, linkedAbort } from '../sleep.js';
import type { Claimed } from '../store/lease.js';
import type { SourceLease } from '../store/lease-renewal.js';
import { heldElsewhere, type RunResult, runFailed } from './source-sync.js';

/**
 * One turn of one source under its lease (Sync.runHeld of a Sync made for the turn); a
 * once run's `limit` stops it short of the feed's end.
 */
export type Turn = (lease: SourceLease, signal: AbortSignal, limit?: AbortSignal) => Promise<RunResult>;

/** How one turn of one source ended: a result (caught up, leased elsewhere, stopped…) or what it threw. */
export type Outcome =
  | { readonly source: string; readonly ok: true; readonly result: RunResult }
  | { readonly source: string; readonly ok: false; readonly error: unknown };

/** A turn that failed: it threw, or its events are stored but the outbox could not be drained. */
export function turnFailed(outcome: Outcome): boolean {
  return !outcome.ok || runFailed(outcome.result);
}

/** When a source is due again after a turn: one interval, or its back-off after `failures` failed turns in a row. */
export function dueInMs(intervalMs: number, failures: number): number {
  if (failures === 0) return intervalMs;
  return Math.min(maxBackoffMs(intervalMs), intervalMs * 2 ** (failures - 1));
}

/**
 * Runs one turn under `lease` and gives the lease back with the source's next due time.
 * A turn that throws becomes an outcome: one source's failure never reaches another's.
 * A turn stopped by SIGTERM leaves the source due at once, for whichever worker is next.
 */
async function turnUnder(
  lease: SourceLease,
  opts: TurnOptions,
  by: 'once' | 'watch',
  signal: AbortSignal,
  limit?: AbortSignal,
): Promise<Outcome> {
  const { turn, intervalMs } = opts;
  let outcome: Outcome;
  try {
    outcome = { source: lease.source, ok: true, result: await turn(lease, signal, limit) };
  } catch (error) {
    outcome = { source: lease.source, ok: false, error };
  }
  const failed = turnFailed(outcome);
  // Not at the feed's end: due again at once, for whichever worker is next.
  const stopped =
    outcome.ok && (outcome.result.status === 'stopped' || outcome.result.status === 'limit-reached');
  // A turn that stored its events but could not drain failed too: status says why (Redis, mostly).
  const error = outcome.ok ? outcome.result.drainError : outcome.error;
  await lease.release({
    failed,
    succeeded: outcome.ok && outcome.result.status === 'caught-up',
    dueInMs: stopped ? 0 : dueInMs(intervalMs, failed ? lease.failures + 1 : 0),
    ...(failed && (!outcome.ok || error !== undefined) ? { error: opts.describe(error) } : {}),
    by,
  });
  return outcome;
}

/** What the scheduler needs to run a turn, in either mode. */
export interface TurnOptions {
  turn: Turn;
  /** The pause between the end of a source's turn and its next one. */
  intervalMs: number;
  /** A failure as one line without secrets, kept in the lease row for `status`. */
  describe: (err: unknown) => string;
  /**
   * Per account, whether a turn may start now (AccountTurns, below): a source whose paced
   * account has a turn in flight here waits, and the lane runs another. Default: any.
   */
  accounts?: Pick<AccountTurns, 'enter' | 'leave'>;
}

export interface EachOnceOptions extends TurnOptions {
  sources: readonly string[];
  concurrency: number;
  /** Aborted by SIGTERM: turns in flight stop at their next commit, no new one starts. */
  signal: AbortSignal;
  /** Aborted at SYNC_ONCE_MAX_MS: turns in flight commit what they fetched and stop, no new one starts. */
  limit?: AbortSignal;
  /** Takes a source's lease whatever its due time; null when another worker holds it. */
  take: (source: string) => Promise<SourceLease | null>;
  onOutcome?: (outcome: Outcome) => void;
}

/** How many sources whose accounts have a turn in flight a lane passes over to find one that has none. */
const PASS_OVER_AT_MOST = 1_000;

/**
 * `sync --once`: every source once, at most `concurrency` at a time, each to
 * caught-up (or leased elsewhere, or failed, or stopped at the limit). Sources not
 * reached before the signal or the limit aborted have no outcome. A source whose paced
 * account has a turn in flight (`accounts`) is passed over for the next.
 */
export async function runEachOnce(opts: EachOnceOptions): Promise<Outcome[]> {
  let next = 0;
  // Sources a lane passed over because their account had a turn in flight: tried first
  // once it has none, else taken last.
  const passedOver: string[] = [];
  const outcomes: Outcome[] = [];
  const enter = (source: string): boolean => opts.accounts?.enter(source) ?? true;
  // The first source whose account has room, looking at PASS_OVER_AT_MOST at most; when
  // none has, the first passed over (its turn waits its turn).
  const pick = (): string => {
    for (let i = 0; i < passedOver.length && i < PASS_OVER_AT_MOST; i++)
      if (enter(passedOver[i]!)) return passedOver.splice(i, 1)[0]!;
    for (let looked = 0; next < opts.sources.length && looked < PASS_OVER_AT_MOST; looked++) {
      const source = opts.sources[next++]!;
      if (enter(source)) return source;
      passedOver.push(source);
    }
    const source = passedOver.shift()!;
    opts.accounts?.enter(source, true);
    return source;
  };
  const lane = async (): Promise<void> => {
    while (
      (next < opts.sources.length || passedOver.length > 0) &&
      !opts.signal.aborted &&
      !opts.limit?.aborted
    ) {
      const source = pick();
      let outcome: Outcome;
      try {
        const lease = await opts.take(source);
        outcome = lease
          ? await turnUnder(lease, opts, 'once', opts.signal, opts.limit)
          : { source, ok: true, result: heldElsewhere() };
      } catch (error) {
        outcome = { source, ok: false, error };
      } finally {
        opts.accounts?.leave(source);
      }
      outcomes.push(outcome);
      opts.onOutcome?.(outcome);
    }
  };
  await Promise.all(Array.from({ length: Math.min(opts.concurrency, opts.sources.length) }, lane));
  return outcomes;
}

export interface WatchSourcesOptions extends TurnOptions {
  concurrency: number;
  /** Aborted by SIGTERM: turns in flight stop at their next commit, no new one starts. */
  signal: AbortSignal;
  /** Claims up to `limit` due sources, and says when the next is due, in one statement (lease.ts claimDue). */
  claim: (limit: number) => Promise<Claimed>;
  logger: Logger;
  /** Called whenever the loop shows it is alive. */
  onBeat?: () => void;
  onOutcome?: (outcome: Outcome) => void;
  /** A claim that failed (Postgres not answering), and how long the loop waits before the next. */
  onClaimFailure?: (err: unknown, retryInMs: number) => void;
  /** Waits `ms`, or rejects once the signal aborts (`defaultSleep`); tests pass their own. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
}

/**
 * `sync --watch`, for one source or ten thousand alike: claim the due sources for the
 * free lanes (one statement, most overdue first), run each to caught-up, give its lease
 * back due one interval later (or its back-off), and sleep until the next is due or a
 * lane frees up. What this replica remembers does not grow with the sources: their due
 * times and failure counts live in their lease rows. Nothing here ends the loop but the
 * signal: a rejected key or a bad filter is one source's failure, logged on each of
 * its turns; Postgres not answering a claim is retried, doubling the wait up to ten
 * intervals.
 */
export async function watchSources(opts: WatchSourcesOptions): Promise<void> {
  const log = opts.logger.child({ module: 'scheduler' });
  const inFlight = new Set<Promise<void>>();
  const sleep = opts.sleep ?? defaultSleep;
  let wake: (() => void) | null = null;
  // A turn that ended while the loop was not asleep: the next sleep is skipped.
  let woken = false;
  let claimFailures = 0;
  // Sources put back at the last claim because their account had a turn here: claimed
  // beside the free lanes next time, so that they do not stand before every other due one.
  let heldBack = 0;
  // Never claim in a tight loop, whatever a due time says.
  const minPauseMs = Math.min(100, opts.intervalMs);

  // A sleep that a turn's end or the signal cuts short; it leaves no listener behind.
  const pause = async (ms: number): Promise<void> => {
    if (woken) {
      woken = false;
      return;
    }
    const cut = linkedAbort(opts.signal);
    wake = () => {
      wake = null;
      woken = false;
      cut.abort();
    };
    try {
      await sleep(Math.max(minPauseMs, ms), cut.signal);
    } catch (err) {
      if (!cut.signal.aborted) throw err;
    } finally {
      cut.dispose();
      wake = null;
      woken = false;
    }
  };

  while (!opts.signal.aborted) {
    opts.onBeat?.();
    let waitMs = opts.intervalMs;
    const free = opts.concurrency - inFlight.size;
    if (free > 0) {
      try {
        const asked = free + heldBack;
        const claimed = await opts.claim(asked);
        heldBack = 0;
        for (const lease of claimed.leases) {
          if (inFlight.size >= opts.concurrency || !(opts.accounts?.enter(lease.source) ?? true)) {
            // No lane left, or its account's turn here would hold this one waiting: untouched, for later.
            if (inFlight.size < opts.concurrency) heldBack++;
            await lease.putBack();
            continue;
          }
          const running = turnUnder(lease, opts, 'watch', opts.signal).then((outcome) => {
            opts.accounts?.leave(lease.source);
            inFlight.delete(running);
            opts.onOutcome?.(outcome);
            woken = true;
            wake?.();
          });
          inFlight.add(running);
        }
        // With a lane still free, sleep until the next source is due (a beat at most). A
        // source put back is due already: claim past it at once while the claim came back
        // full (more may be due), else look again in a second, or when a turn ends.
        if (inFlight.size < opts.concurrency) {
          const full = claimed.leases.length >= asked;
          waitMs =
            heldBack > 0
              ? full
                ? 0
                : Math.min(opts.intervalMs, 1_000)
              : Math.min(opts.intervalMs, claimed.nextDueInMs ?? opts.intervalMs);
        }
        claimFailures = 0;
      } catch (err) {
        claimFailures++;
        waitMs = dueInMs(opts.intervalMs, claimFailures);
        log.error(
          { err, failures: claimFailures, retryInMs: waitMs },
          'could not claim sources; backing off',
        );
        opts.onClaimFailure?.(err, waitMs);
      }
    }
    if (!opts.signal.aborted) await pause(waitMs);
  }
  await Promise.all(inFlight);
}

/**
 * The turns in flight in this process, per account (every source with one key): a lane
 * that took a second source of an account whose request budget is in force would only
 * wait behind the first one's requests, holding a lane another account could use. The
 * scheduler asks `enter` before it runs a turn and picks another source while it says no.
 */
export class AccountTurns {
  readonly #accountOf: (source: string) => { account: string; paced: boolean } | null;
  readonly #inFlight = new Map<string, number>();

  /** `accountOf`: the source's account and whether its budget paces it now; null for a source without a key. */
  constructor(accountOf: (source: string) => { account: string; paced: boolean } | null) {
    this.#accountOf = accountOf;
  }

  /**
   * Counts a turn of `source` in, unless its account is paced and has a turn in flight
   * here already (false; nothing counted). `force`: counted in all the same (nothing else to run).
   */
  enter(source: string, force = false): boolean {
    const of = this.#accountOf(source);
    if (!of) return true;
    const n = this.#inFlight.get(of.account) ?? 0;
    if (n > 0 && of.paced && !force) return false;
    this.#inFlight.set(of.account, n + 1);
    return true;
  }

  /** Counts a turn that `enter` let in out again. */
  leave(source: string): void {
    const of = this.#accountOf(source);
    if (!of) return;
    const n = (this.#inFlight.get(of.account) ?? 1) - 1;
    if (n > 0) this.#inFlight.set(of.account, n);
    else this.#inFlight.delete(of.account);
  }
}
