import type { KeyKind } from '../config/key-kind.js';
import type { CursorEvent } from './cursor-move.js';
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

const leases = (store: Store): string => `${quoteSchema(store.schema)}.leases`;

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

/**
 * The next holder's token: one more, except at int8's maximum (a row edited by hand),
 * where it wraps to 1 instead of failing the whole claim with "bigint out of range",
 * other sources included. Fencing compares tokens for equality, so any change fences.
 */
const NEXT_TOKEN = 'l.token % 9223372036854775807 + 1';

/** The source's sort key in the claim's order (migrations/0008): when it falls due. */
const NEXT_AT = `coalesce(CASE WHEN holder IS NULL THEN due_at ELSE expires_at END, '-infinity'::timestamptz)`;

/**
 * Makes the lease rows of these sources, free, where missing, `batch` names a
 * statement; returns how many it made. The rows follow the sources file: a replica
 * runs this at start and on a timer, so a row deleted by hand comes back.
 */
export async function ensureLeaseRows(
  store: Store,
  sources: readonly string[],
  batch = 5_000,
): Promise<number> {
  let made = 0;
  for (let i = 0; i < sources.length; i += batch) {
    const { rowCount } = await store.pool.query(
      `INSERT INTO ${leases(store)} (source) SELECT unnest($1::text[]) ON CONFLICT (source) DO NOTHING`,
      [sources.slice(i, i + batch)],
    );
    made += rowCount ?? 0;
  }
  return made;
}

interface TakenRow {
  source: string | null;
  token: string;
  failures: number;
  has_cursor: boolean;
  after_id: string | null;
  types: string[] | null;
  key_kind: KeyKind | null;
  check_before: string | null;
  check_digest: string | null;
}

/** The taken rows joined with their cursors: the turn reads no cursor of its own. */
const WITH_CURSOR = (schema: string) => `
SELECT t.source, t.token, t.failures, c.source IS NOT NULL AS has_cursor, c.after_id, c.types, c.key_kind,
  c.check_before, c.check_digest
FROM taken t LEFT JOIN ${schema}.cursors c ON c.source = t.source`;

// A row locked by a commit in flight (see apply-statement.ts) is skipped, not waited for:
// a frozen or cut-off writer never makes a taker wait, and the next claim tries again.
// A missing row is made; the same statement cannot take it (its snapshot predates it).
const TAKE = (store: Store) => {
  const table = leases(store);
  return `
WITH created AS (
  INSERT INTO ${table} (source) VALUES ($1::text) ON CONFLICT (source) DO NOTHING RETURNING source
), taken AS (
  UPDATE ${table} l SET holder = $2::text, token = ${NEXT_TOKEN},
    expires_at = now() + $3::int * interval '1 millisecond', taken_at = now()
  FROM (
    SELECT source FROM ${table}
    WHERE source = $1::text AND (holder IS NULL OR expires_at <= now())
    FOR UPDATE SKIP LOCKED
  ) free
  WHERE l.source = free.source
  RETURNING l.source, l.token::text AS token, l.failures
)
SELECT taken.*, (SELECT count(*) FROM created)::int AS created,
  EXISTS (SELECT FROM ${table} WHERE source = $1::text AND (holder IS NULL OR expires_at <= now())) AS free
FROM (SELECT) one LEFT JOIN (${WITH_CURSOR(quoteSchema(store.schema))}) taken ON true`;
};

/**
 * Takes the lease of `source` when it is free or its holder's lease ran out, whatever
 * its due time (a once run, a cursor command), with the source's cursor. Null when
 * another worker holds it. One statement, two when the row had to be made.
 *
 * A free row that a statement has locked (the commit of a holder whose lease ran out,
 * still running in Postgres after its process died; another taker) is skipped by the
 * statement, not held by anyone: it is asked again every 50 ms for up to one lease, a
 * commit's deadline being shorter, so that a once run never mistakes it for a holder.
 */
export async function takeLease(
  store: Store,
  source: string,
  opts: LeaseOptions,
): Promise<SourceLease | null> {
  const text = TAKE(store);
  const deadline = performance.now() + opts.leaseMs;
  for (;;) {
    const { rows } = await store.pool.query<TakenRow & { created: number; free: boolean }>(text, [
      source,
      opts.holder,
      opts.leaseMs,
    ]);
    const row = rows[0];
    if (row?.source) return held(store, { ...row, source: row.source }, opts);
    // Made just now: this statement's snapshot predates the row; the next one takes it.
    if (row?.created && performance.now() < deadline) continue;
    if (!row?.free || performance.now() >= deadline) return null;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** What a claim took, and when the next source falls due. */
export interface Claimed {
  leases: SourceLease[];
  /** Milliseconds until the next source not taken here is due (0: one is due now); null: no other source. */
  nextDueInMs: number | null;
}

/**
 * The claim: $1 holder, $2 lease ms, $3 limit, $4 only these sources (null: any), $5
 * not these. Exported for bench/claim-cost.mjs, which explains it.
 */
export function claimStatement(store: Store): string {
  const table = leases(store);
  const inScope = `($4::text[] IS NULL OR source = ANY ($4::text[])) AND NOT (source = ANY ($5::text[]))`;
  return `WITH due AS (
       SELECT source FROM ${table}
       WHERE ${NEXT_AT} <= now() AND ${inScope}
       ORDER BY ${NEXT_AT}, source
       LIMIT $3::int
       FOR UPDATE SKIP LOCKED
     ), taken AS (
       UPDATE ${table} l SET holder = $1::text, token = ${NEXT_TOKEN},
         expires_at = now() + $2::int * interval '1 millisecond', taken_at = now()
       FROM due
       WHERE l.source = due.source
       RETURNING l.source, l.token::text AS token, l.failures
     ), next AS (
       SELECT min(${NEXT_AT}) AS at FROM ${table}
       WHERE ${inScope} AND NOT (source = ANY (ARRAY(SELECT source FROM due)))
     )
     SELECT claimed.*, (extract(epoch FROM greatest(next.at, now()) - now()) * 1000)::float8 AS next_ms
     FROM next LEFT JOIN (${WITH_CURSOR(quoteSchema(store.schema))}) claimed ON true`;
}

/**
 * Which lease rows a claim looks at: every row but those `except` names (sources of no
 * file this worker runs), or only those `only` names (a worker of one source among
 * many: `sync --source`).
 */
export type ClaimScope = { only: readonly string[] } | { except: readonly string[] };

/**
 * Claims up to `limit` sources that are due and free, most overdue first, with their
 * cursors, in one statement: a source is due when its last turn gave the lease back
 * at least its interval ago (due_at), or when its holder's lease ran out in the middle
 * of a turn. The claim reads the lease rows in that order over an index; with the
 * scope `except` (the lease rows follow the file: ensureLeaseRows) it names no source
 * of the file, so its cost does not grow with the file. Rows another claim or a commit
 * has locked are skipped (SKIP LOCKED), so replicas claiming at once never wait on each
 * other nor take the same source. The same statement says when the next source in
 * scope is due, for the loop's sleep.
 */
export async function claimDue(
  store: Store,
  limit: number,
  opts: LeaseOptions,
  scope: ClaimScope = { except: [] },
): Promise<Claimed> {
  const { rows } = await store.pool.query<TakenRow & { next_ms: number | null }>(claimStatement(store), [
    opts.holder,
    opts.leaseMs,
    Math.max(0, limit),
    'only' in scope ? namesLiteral(scope.only) : null,
    'except' in scope ? scope.except : [],
  ]);
  const next = rows[0]?.next_ms;
  return {
    leases: rows.flatMap(({ source, ...row }) => (source ? [held(store, { ...row, source }, opts)] : [])),
    nextDueInMs: next === null || next === undefined ? null : Math.max(0, Math.ceil(next)),
  };
}

const literals = new WeakMap<readonly string[], string>();

/**
 * The names as a Postgres text[] literal, made once per list: a watch loop passes the
 * same list to every claim, and the driver would serialise it each time. Names hold
 * no control characters (sources-file.ts), so quoting is enough.
 */
function namesLiteral(sources: readonly string[]): string {
  let literal = literals.get(sources);
  if (literal === undefined) {
    literal = `{${sources.map((n) => `"${n.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`).join(',')}}`;
    literals.set(sources, literal);
  }
  return literal;
}

/**
 * Brings forward the due times stored under a longer interval (an earlier run's
 * SYNC_INTERVAL_MS) to what the interval in force gives: a free source is due at the
 * latest `intervalMs` after its last turn began, or its back-off after failed turns
 * (`intervalMs` doubled per failure after the first, at most `maxBackoffMs`). One
 * statement, when a watch starts; returns how many sources it brought forward.
 */
export async function pullDueTimesIn(
  store: Store,
  intervalMs: number,
  maxBackoffMs: number,
): Promise<number> {
  const { rowCount } = await store.pool.query(
    `WITH wanted AS (
       SELECT source, taken_at + interval '1 millisecond' * CASE WHEN failures = 0 THEN $1::float8
         ELSE least($2::float8, $1::float8 * power(2, failures - 1)) END AS due
       FROM ${leases(store)}
       WHERE taken_at IS NOT NULL AND due_at IS NOT NULL AND (holder IS NULL OR expires_at <= now())
     )
     UPDATE ${leases(store)} l SET due_at = wanted.due
     FROM wanted WHERE l.source = wanted.source AND l.due_at > wanted.due`,
    [intervalMs, maxBackoffMs],
  );
  return rowCount ?? 0;
}

/**
 * Milliseconds until the next source is due (0 when one is due now), at most `atMost`:
 * what a watch says at start when nothing is due yet. Over the claim's index.
 */
export async function nextDueInMs(store: Store, atMost: number): Promise<number> {
  const { rows } = await store.pool.query<{ ms: number | null }>(
    `SELECT (extract(epoch FROM greatest(min(${NEXT_AT}), now()) - now()) * 1000)::float8 AS ms FROM ${leases(store)}`,
  );
  const ms = rows[0]?.ms;
  return ms === null || ms === undefined ? atMost : Math.min(atMost, Math.max(0, Math.ceil(ms)));
}

/**
 * How many sources have been due for longer than `graceMs` and not claimed: the
 * replicas do not keep up, or run none of them. A source never turned yet counts until
 * its first turn; one whose last turn was a once run (a CronJob's) does not: no watch runs it. Over the claim's index: it reads only the overdue rows.
 */
export async function overdueSources(store: Store, graceMs: number): Promise<number> {
  const { rows } = await store.pool.query<{ n: string }>(
    `SELECT count(*) AS n FROM ${leases(store)} WHERE ${NEXT_AT} < now() - $1::int * interval '1 millisecond'
       AND last_turn IS DISTINCT FROM 'once'`,
    [Math.round(graceMs)],
  );
  return Number(rows[0]?.n ?? 0);
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
      const { rowCount } = await store.pool.query(
        `UPDATE ${leases(store)} SET expires_at = now() + $3::int * interval '1 millisecond'
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
function held(store: Store, row: TakenRow & { source: string }, opts: LeaseOptions): SourceLease {
  const table = leases(store);
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
    giveBack(
      `WITH given AS (
         UPDATE ${table} SET holder = NULL, expires_at = NULL,
           due_at = now() + $3::int * interval '1 millisecond', last_turn = coalesce($7::text, last_turn),
           failures = CASE WHEN $4::boolean THEN failures + 1 ELSE 0 END,
           last_error = CASE WHEN $4::boolean THEN $5::text END
         WHERE source = $1::text AND token = $2::bigint
         RETURNING source
       )
       UPDATE ${quoteSchema(store.schema)}.cursors c SET last_success_at = now()
       FROM given WHERE $6::boolean AND c.source = given.source`,
      [Math.max(0, Math.round(dueInMs)), failed, error, succeeded, by],
    );
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
      released ??= giveBack(
        `UPDATE ${table} SET holder = NULL, expires_at = NULL WHERE source = $1::text AND token = $2::bigint`,
        [],
      );
      return released;
    },
  };
}
