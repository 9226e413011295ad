import type { KeyKind } from '../config/key-kind.js';
import { quoteSchema, type Store } from './db.js';

/**
 * The lease table's statements (migrations/0004_leases.sql and later): the text of the
 * take and the claim, and the reads and edits of the table beside them. The live lease
 * that renews and gives back a taken row is lease-renewal.ts.
 */

export const leases = (store: Store): string => `${quoteSchema(store.schema)}.leases`;

/**
 * The next holder's token: one more, except at int8's maximum (a row edited by hand),
 * where it wraps to 1 instead of failing the whole claim with "bigint out of range",
 * other sources included. Fencing compares tokens for equality, so any change fences.
 */
export const NEXT_TOKEN = 'l.token % 9223372036854775807 + 1';

/** The source's sort key in the claim's order (migrations/0008): when it falls due. */
export const NEXT_AT = `coalesce(CASE WHEN holder IS NULL THEN due_at ELSE expires_at END, '-infinity'::timestamptz)`;

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

export interface TakenRow {
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
export const WITH_CURSOR = (schema: string) => `
SELECT t.source, t.token, t.failures, c.source IS NOT NULL AS has_cursor, c.after_id, c.types, c.key_kind,
  c.check_before, c.check_digest
FROM taken t LEFT JOIN ${schema}.cursors c ON c.source = t.source`;

// A row locked by a commit in flight (see apply-statement.ts) is skipped, not waited for:
// a frozen or cut-off writer never makes a taker wait, and the next claim tries again.
// A missing row is made; the same statement cannot take it (its snapshot predates it).
export const TAKE = (store: Store) => {
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

/** The renewal of a held lease: $1 source, $2 token, $3 lease ms; no row when another worker took it. */
export const RENEW = (store: Store): string =>
  `UPDATE ${leases(store)} SET expires_at = now() + $3::int * interval '1 millisecond'
   WHERE source = $1::text AND token = $2::bigint AND holder IS NOT NULL`;

/**
 * Gives a held lease back and records a turn that caught up (the cursor's
 * last_success_at), in one statement: $1 source, $2 token, $3 due in ms, $4 failed,
 * $5 error, $6 succeeded, $7 the kind of run (null: left as it was).
 */
export const RELEASE = (store: Store): string =>
  `WITH given AS (
       UPDATE ${leases(store)} SET holder = NULL, expires_at = NULL,
         due_at = now() + $3::int * interval '1 millisecond', last_turn = coalesce($7::text, last_turn),
         failures = CASE WHEN $4::boolean THEN failures + 1 ELSE 0 END,
         last_error = CASE WHEN $4::boolean THEN $5::text END
       WHERE source = $1::text AND token = $2::bigint
       RETURNING source
     )
     UPDATE ${quoteSchema(store.schema)}.cursors c SET last_success_at = now()
     FROM given WHERE $6::boolean AND c.source = given.source`;

/** Gives a held lease back as it was found (due time, failures and error untouched): $1 source, $2 token. */
export const PUT_BACK = (store: Store): string =>
  `UPDATE ${leases(store)} SET holder = NULL, expires_at = NULL WHERE source = $1::text AND token = $2::bigint`;
