import type { KeyKind } from '../config/key-kind.js';
import type { CursorEvent } from './cursor-move.js';
import type { Store } from './db.js';
import { PUT_BACK, RELEASE, RENEW, type TakenRow } from './lease-statements.js';

/**
 * A held lease of one source (migrations/0004_leases.sql): the row names this worker
 * and the token, and ends `leaseMs` after Postgres's now() unless renewed. Nothing is
 * held in a Postgres session, so it works through a transaction pooler, and a holder
 * that freezes or is cut off loses the source when the lease runs out.
 */
export interface SourceLease {
  readonly source: string;
  /** The fencing token (int8 as text): every commit of this holder names it. */
  readonly token: string;
  /** Turns of the source in a row that failed before this one (for the back-off). */
  readonly failures: number;
  /** Aborted when the lease is lost: another worker took it, or it could not be renewed in time. */
  readonly signal: AbortSignal;
  readonly lost: boolean;
  /**
   * The turn moved on (a feed response, a commit), or is about to wait `waitMs` on
   * purpose (a retry's back-off). With `stallMs`, a lease whose turn shows no progress
   * for that long is not renewed: it is lost, and another worker may take the source.
   */
  progress(waitMs?: number): void;
  /** True once the turn has shown no progress for longer than `stallMs` (never without it). */
  readonly stalled: boolean;
  /** The source's cursor, read with the lease; null: the source has none yet. */
  readonly cursor: LeasedCursor | null;
  /**
   * Stops renewing and gives the lease back, the source due again `dueInMs` from now
   * (0: at once). `failed` counts the turn in the row's failures, else resets them;
   * `error` (one line, no secrets) is kept for `status` until a turn that did not fail;
   * `succeeded` stamps the cursor's last_success_at (the turn caught up), in the same
   * statement. A lease already lost is left to its new holder. Safe to call twice.
   */
  release(opts?: {
    dueInMs?: number;
    failed?: boolean;
    error?: string;
    succeeded?: boolean;
    /** Which kind of run the turn was, for status (migrations/0018); omitted: left as it was. */
    by?: 'once' | 'watch';
  }): Promise<void>;
  /** Gives the lease back as it was found: due time, failures and error untouched (a source this worker does not run). */
  putBack(): Promise<void>;
}

export interface LeaseOptions {
  /** Who takes it: host name and pid, shown by `status`. */
  holder: string;
  /** SOURCE_LEASE_MS: how long a lease holds unless renewed. */
  leaseMs: number;
  /**
   * How long a turn may go without progress (SourceLease.progress) before its lease is
   * no longer renewed. Omitted: the lease is renewed while held (a cursor command).
   */
  stallMs?: number;
}

/** Thrown into a turn (as its signal's reason) when its lease was lost. */
export class LeaseLostError extends Error {
  constructor(source: string, why: string) {
    super(`lost the lease of source "${source}" (${why}); stopped its turn`);
    this.name = 'LeaseLostError';
  }
}

/** A held lease's source, as the claim read it with the lease: no statement of its own. */
export interface LeasedCursor {
  /** The id to read after; null: the start of the feed. */
  afterId: string | null;
  /** The type filter the cursor was built with; null: every type. */
  types: string[] | null;
  /** The kind of API key the cursor was built with; null: not recorded yet. */
  keyKind: KeyKind | null;
  /** What the turn's first page is checked against; null: nothing to check. */
  check: CursorEvent | null;
}

/** A held lease's renewal, on a timer at a third of its length, while its turn shows progress. */
interface Renewal {
  /** Stops the timer; resolves once a renewal in flight has ended. */
  stop(): Promise<void>;
  progress(waitMs: number): void;
  stalled(): boolean;
}

function renewal(
  store: Store,
  row: { source: string; token: string },
  opts: LeaseOptions,
  lose: (why: string) => void,
): Renewal {
  // When the lease ends for sure by this worker's clock, unless a renewal lands before.
  let confirmedUntil = performance.now() + opts.leaseMs;
  // Past this, with no progress of the turn meanwhile, it is stuck: renewing would keep
  // every other worker from a source nobody moves on.
  const stallMs = opts.stallMs ?? Number.POSITIVE_INFINITY;
  let quietUntil = performance.now() + stallMs;
  const stalled = (): boolean => performance.now() > quietUntil;
  let renewing: Promise<void> | null = null;
  const renew = async (): Promise<void> => {
    const asked = performance.now();
    try {
      const { rowCount } = await store.pool.query(RENEW(store), [row.source, row.token, opts.leaseMs]);
      if (rowCount === 0) lose('another worker took it');
      else confirmedUntil = asked + opts.leaseMs;
    } catch {
      // Postgres unreachable: the lease may run out meanwhile, and then another worker may
      // take it. Past that point this turn stops; its commits were fenced all along.
      if (performance.now() >= confirmedUntil) lose('it could not be renewed before it ran out');
    }
  };
  const timer = setInterval(
    () => {
      if (performance.now() >= confirmedUntil) lose('it could not be renewed before it ran out');
      if (stalled()) {
        lose(`its turn made no progress for ${stallMs} ms, so it was not renewed`);
        clearInterval(timer);
        return;
      }
      renewing ??= renew().finally(() => {
        renewing = null;
      });
    },
    Math.max(1, Math.floor(opts.leaseMs / 3)),
  );
  // A turn in flight keeps the process alive by itself; the renewal alone must not.
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await renewing;
    },
    progress(waitMs) {
      quietUntil = Math.max(quietUntil, performance.now() + waitMs + stallMs);
    },
    stalled,
  };
}

/** A taken lease: renewed until released or lost. */
export function held(store: Store, row: TakenRow & { source: string }, opts: LeaseOptions): SourceLease {
  const controller = new AbortController();
  const lose = (why: string): void => {
    if (!controller.signal.aborted) controller.abort(new LeaseLostError(row.source, why));
  };
  const renewed = renewal(store, row, opts, lose);

  let released: Promise<void> | undefined;
  /** Stops renewing, then runs `statement` with the row's source and token unless the lease was lost. */
  const giveBack = async (statement: string, params: readonly unknown[]): Promise<void> => {
    const stopped = renewed.stop();
    // A lease already lost is its new holder's; a renewal in flight (Postgres unreachable) is not waited for then.
    if (controller.signal.aborted) return;
    await stopped;
    if (controller.signal.aborted) return;
    // A give-back that fails (Postgres gone) leaves the lease to run out: nothing to undo.
    await store.pool.query(statement, [row.source, row.token, ...params]).catch(() => {});
  };
  // One statement gives the lease back and records a turn that caught up (the cursor's last_success_at).
  const release = (
    dueInMs: number,
    failed: boolean,
    error: string | null,
    succeeded: boolean,
    by: 'once' | 'watch' | null,
  ): Promise<void> =>
    giveBack(RELEASE(store), [Math.max(0, Math.round(dueInMs)), failed, error, succeeded, by]);
  return {
    source: row.source,
    token: row.token,
    failures: row.failures,
    cursor: row.has_cursor
      ? {
          afterId: row.after_id,
          types: row.types,
          keyKind: row.key_kind,
          check: row.check_digest === null ? null : { before: row.check_before, digest: row.check_digest },
        }
      : null,
    signal: controller.signal,
    get lost() {
      return controller.signal.aborted;
    },
    progress(waitMs = 0) {
      renewed.progress(waitMs);
    },
    get stalled() {
      return renewed.stalled();
    },
    release(o = {}) {
      released ??= release(
        o.dueInMs ?? 0,
        o.failed ?? false,
        o.error?.slice(0, 500) ?? null,
        o.succeeded ?? false,
        o.by ?? null,
      );
      return released;
    },
    putBack() {
      released ??= giveBack(PUT_BACK(store), []);
      return released;
    },
  };
}
