import type { Store } from './db.js';
import { held, type LeaseOptions, type SourceLease } from './lease-renewal.js';
import { claimStatement, TAKE, type TakenRow } from './lease-statements.js';

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
