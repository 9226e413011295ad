import { quoteSchema, type Store } from './db.js';

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
   * Stops renewing and gives the lease back, the source due again `dueInMs` from now
   * (0: at once). `failed` counts the turn in the row's failures, else resets them;
   * `error` (one line, no secrets) is kept for `status` until a turn that did not fail.
   * A lease already lost is left to its new holder. Safe to call twice.
   */
  release(opts?: { dueInMs?: number; failed?: boolean; error?: string }): Promise<void>;
}

export interface LeaseOptions {
  /** Who takes it: host name and pid, shown by `status`. */
  holder: string;
  /** SOURCE_LEASE_MS: how long a lease holds unless renewed. */
  leaseMs: number;
}

/** Thrown into a turn (as its signal's reason) when its lease was lost. */
export class LeaseLostError extends Error {
  constructor(source: string, why: string) {
    super(`lost the lease of source "${source}" (${why}); stopped its turn`);
    this.name = 'LeaseLostError';
  }
}

const leases = (store: Store): string => `${quoteSchema(store.schema)}.leases`;

const literals = new WeakMap<readonly string[], string>();

/**
 * The names as a Postgres text[] literal, made once per list: a watch loop passes the
 * same list of thousands of sources to every claim, and the driver would serialise it
 * each time. Names hold no control characters (sources-file.ts), so quoting is enough.
 */
function namesLiteral(sources: readonly string[]): string {
  let literal = literals.get(sources);
  if (literal === undefined) {
    literal = `{${sources.map((n) => `"${n.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`).join(',')}}`;
    literals.set(sources, literal);
  }
  return literal;
}

/** Makes the lease rows of these sources, free, where missing. One statement. */
export async function ensureLeaseRows(store: Store, sources: readonly string[]): Promise<void> {
  await store.pool.query(
    `INSERT INTO ${leases(store)} (source) SELECT unnest($1::text[]) ON CONFLICT (source) DO NOTHING`,
    [sources],
  );
}

interface TakenRow {
  source: string;
  token: string;
  failures: number;
}

// A row locked by a commit in flight (see apply-statement.ts) is skipped, not waited for:
// a frozen or cut-off writer never makes a taker wait, and the next claim tries again.
const TAKE = (table: string) => `
UPDATE ${table} l SET holder = $2::text, token = l.token + 1,
  expires_at = now() + $3::int * interval '1 millisecond', taken_at = now()
FROM (
  SELECT source FROM ${table}
  WHERE source = $1::text AND (holder IS NULL OR expires_at <= now())
  FOR UPDATE SKIP LOCKED
) free
WHERE l.source = free.source
RETURNING l.source, l.token::text AS token, l.failures`;

/**
 * Takes the lease of `source` when it is free or its holder's lease ran out, whatever
 * its due time (a once run, a cursor command). Null when another worker holds it.
 */
export async function takeLease(
  store: Store,
  source: string,
  opts: LeaseOptions,
): Promise<SourceLease | null> {
  await ensureLeaseRows(store, [source]);
  const { rows } = await store.pool.query<TakenRow>(TAKE(leases(store)), [source, opts.holder, opts.leaseMs]);
  const row = rows[0];
  return row ? held(store, row, opts) : null;
}

/**
 * Claims up to `limit` of `sources` that are due and free, most overdue first, in one
 * statement: a source is due when its last turn gave the lease back at least its
 * interval ago (due_at), or when its holder's lease ran out in the middle of a turn.
 * Rows another claim or a commit has locked are skipped (SKIP LOCKED), so replicas
 * claiming at once never wait on each other nor take the same source.
 */
export async function claimDue(
  store: Store,
  sources: readonly string[],
  limit: number,
  opts: LeaseOptions,
): Promise<SourceLease[]> {
  if (limit <= 0) return [];
  const table = leases(store);
  const { rows } = await store.pool.query<TakenRow>(
    `UPDATE ${table} l SET holder = $2::text, token = l.token + 1,
       expires_at = now() + $3::int * interval '1 millisecond', taken_at = now()
     FROM (
       SELECT source FROM ${table}
       WHERE source = ANY($1::text[])
         AND CASE WHEN holder IS NULL THEN due_at IS NULL OR due_at <= now() ELSE expires_at <= now() END
       ORDER BY CASE WHEN holder IS NULL THEN due_at ELSE expires_at END NULLS FIRST, source
       LIMIT $4::int
       FOR UPDATE SKIP LOCKED
     ) due
     WHERE l.source = due.source
     RETURNING l.source, l.token::text AS token, l.failures`,
    [namesLiteral(sources), opts.holder, opts.leaseMs, limit],
  );
  return rows.map((row) => held(store, row, opts));
}

/**
 * Milliseconds until the next of `sources` is due (0 when one is due now), at most
 * `atMost`: how long a watch loop with a free lane sleeps.
 */
export async function nextDueInMs(store: Store, sources: readonly string[], atMost: number): Promise<number> {
  const { rows } = await store.pool.query<{ ms: number | null }>(
    `SELECT (extract(epoch FROM min(CASE WHEN holder IS NULL THEN coalesce(due_at, now()) ELSE expires_at END) - now())
        * 1000)::float8 AS ms
     FROM ${leases(store)} WHERE source = ANY($1::text[])`,
    [namesLiteral(sources)],
  );
  const ms = rows[0]?.ms;
  return ms === null || ms === undefined ? atMost : Math.min(atMost, Math.max(0, Math.ceil(ms)));
}

/** Who holds a source now, for a message: null when it is free. */
export async function leaseHolderOf(
  store: Store,
  source: string,
): Promise<{ holder: string; token: string; expiresAt: Date } | null> {
  const { rows } = await store.pool.query<{ holder: string; token: string; expires_at: Date }>(
    `SELECT holder, token::text AS token, expires_at FROM ${leases(store)}
     WHERE source = $1 AND holder IS NOT NULL AND expires_at > now()`,
    [source],
  );
  const row = rows[0];
  return row ? { holder: row.holder, token: row.token, expiresAt: row.expires_at } : null;
}

/**
 * Runs `fn` under the lease of `source` (a cursor command), taking it as soon as it is
 * free, for at most `waitMs`; null when it stayed held that long. The lease is given
 * back after, the source due at once.
 */
export async function withLease<T>(
  store: Store,
  source: string,
  opts: LeaseOptions & { waitMs: number },
  fn: (lease: SourceLease) => Promise<T>,
): Promise<{ value: T } | null> {
  const deadline = performance.now() + opts.waitMs;
  for (;;) {
    const lease = await takeLease(store, source, opts);
    if (lease) {
      try {
        return { value: await fn(lease) };
      } finally {
        await lease.release();
      }
    }
    if (performance.now() >= deadline) return null;
    await new Promise((resolve) => setTimeout(resolve, Math.min(500, opts.waitMs)));
  }
}

/** A taken lease: renewed at a third of its length until released or lost. */
function held(store: Store, row: TakenRow, opts: LeaseOptions): SourceLease {
  const table = leases(store);
  const controller = new AbortController();
  const lose = (why: string): void => {
    if (!controller.signal.aborted) controller.abort(new LeaseLostError(row.source, why));
  };
  // When the lease ends for sure by this worker's clock, unless a renewal lands before.
  let confirmedUntil = performance.now() + opts.leaseMs;
  let renewing: Promise<void> | null = null;
  const renew = async (): Promise<void> => {
    const asked = performance.now();
    try {
      const { rowCount } = await store.pool.query(
        `UPDATE ${table} SET expires_at = now() + $3::int * interval '1 millisecond'
         WHERE source = $1::text AND token = $2::bigint AND holder IS NOT NULL`,
        [row.source, row.token, opts.leaseMs],
      );
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
      renewing ??= renew().finally(() => {
        renewing = null;
      });
    },
    Math.max(1, Math.floor(opts.leaseMs / 3)),
  );
  // A turn in flight keeps the process alive by itself; the renewal alone must not.
  timer.unref();

  let released: Promise<void> | undefined;
  const release = async (dueInMs: number, failed: boolean, error: string | null): Promise<void> => {
    clearInterval(timer);
    // A lease already lost is its new holder's; a renewal in flight (Postgres unreachable) is not waited for then.
    if (controller.signal.aborted) return;
    await renewing;
    if (controller.signal.aborted) return;
    // A release that fails (Postgres gone) leaves the lease to run out: nothing to undo.
    await store.pool
      .query(
        `UPDATE ${table} SET holder = NULL, expires_at = NULL,
         due_at = now() + $3::int * interval '1 millisecond',
         failures = CASE WHEN $4::boolean THEN failures + 1 ELSE 0 END,
         last_error = CASE WHEN $4::boolean THEN $5::text END
       WHERE source = $1::text AND token = $2::bigint`,
        [row.source, row.token, Math.max(0, Math.round(dueInMs)), failed, error],
      )
      .catch(() => {});
  };
  return {
    source: row.source,
    token: row.token,
    failures: row.failures,
    signal: controller.signal,
    get lost() {
      return controller.signal.aborted;
    },
    release(o = {}) {
      released ??= release(o.dueInMs ?? 0, o.failed ?? false, o.error?.slice(0, 500) ?? null);
      return released;
    },
  };
}
