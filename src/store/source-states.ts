import { quoteSchema, type Store } from './db.js';

/**
 * A source lags when its newest stored event is older than this (seconds): the
 * threshold of the FeedsyncCursorLag alert, so `status --lagging`, the
 * feedsync_sources_lagging gauge and the alert name the same sources.
 */
export const LAGGING_AFTER_SECONDS = 1800;

/**
 * The state of each source of `names` (a query with a `source` column, each name once)
 * in one pass over rows kept per source (leases, cursors, source_counts), never over
 * events, in as few columns as the counts and the order need:
 *   failures         turns in a row that failed (the lease row's count); failing when above 0
 *   lag_seconds      now minus its newest stored event (future dates left out); NULL while none
 *   lagging          lag_seconds above LAGGING_AFTER_SECONDS
 *   last_success_at  when it last caught up; never when NULL
 * Every source of `names` has a row, known or not; with `andKnown`, so does every source
 * with a cursor or stored events (full joins, hashed: no sort of the names, whatever
 * their number).
 */
function sourceStatesSql(schema: string, names: string, opts: { andKnown?: boolean } = {}): string {
  const s = quoteSchema(schema);
  const join = opts.andKnown ? 'FULL JOIN' : 'LEFT JOIN';
  return `SELECT source, src.source IS NOT NULL AS named, coalesce(l.failures, 0) AS failures, c.last_success_at,
      extract(epoch FROM now() - n.newest_event_at)::float8 AS lag_seconds,
      coalesce(l.failures, 0) > 0 AS failing,
      coalesce(now() - n.newest_event_at > make_interval(secs => ${LAGGING_AFTER_SECONDS}), false) AS lagging,
      c.last_success_at IS NULL AS never
    FROM (${names}) src
      ${join} ${s}.cursors c USING (source)
      ${join} ${s}.source_counts n USING (source)
      LEFT JOIN ${s}.leases l USING (source)`;
}

/** Which sources `status` lists: `--failing`, `--lagging`, or every one. */
export type StatusFilter = 'failing' | 'lagging' | null;

/**
 * The statement of `status`: $1 the names to list besides the tables' sources, $2 one
 * source alone or null, $3 how many to list at most (null: every one), $4 SYNC_INTERVAL_MS. The totals come
 * back on every row, and on one row of nulls when nothing is listed.
 */
export function statusStatement(schema: string, filter: StatusFilter = null): string {
  const s = quoteSchema(schema);
  const kept = filter === null ? 'true' : filter;
  return `WITH st AS MATERIALIZED (
       SELECT * FROM (${sourceStatesSql(schema, 'SELECT unnest($1::text[]) AS source', { andKnown: true })}) a
       WHERE $2::text IS NULL OR a.source = $2::text
     ), totals AS (
       SELECT count(*) AS sources, count(*) FILTER (WHERE failing) AS failing_n,
         count(*) FILTER (WHERE lagging) AS lagging_n, count(*) FILTER (WHERE never) AS never_n,
         count(*) FILTER (WHERE ${kept}) AS matched
       FROM st
     ), listed AS (
       SELECT source, named, failures, lag_seconds, lagging, never FROM st WHERE ${kept}
       ORDER BY failures DESC, CASE WHEN lagging THEN lag_seconds END DESC NULLS LAST, never DESC, source
       LIMIT $3
     ), detail AS (
       -- What is shown of the listed sources only: at most the limit of them.
       SELECT listed.*, c.after_id, c.types, c.last_success_at,
         k.holder, k.token::text AS token, k.expires_at, k.expires_at > now() AS live, k.last_error,
         k.due_at, k.due_at > now() AS due_later, k.last_turn,
         -- A source of the file due for a whole interval ($4, ms) that no worker claimed.
         -- A source only once runs (a CronJob) turn is no watch's to be late with.
         named AND k.last_turn IS DISTINCT FROM 'once'
           AND coalesce(CASE WHEN k.holder IS NULL THEN k.due_at ELSE k.expires_at END, '-infinity')
           < now() - $4::int * interval '1 millisecond' AS overdue,
         coalesce(n.events_stored, 0)::float8 AS events_stored, n.newest_event_at,
         (SELECT count(*) FROM ${s}.quarantine q WHERE q.source = listed.source) AS quarantined,
         (SELECT coalesce(sum(versions_seen), 0) FROM ${s}.conflicts x WHERE x.source = listed.source) AS conflicts,
         (SELECT count(*) FROM ${s}.conflicts x WHERE x.source = listed.source) AS conflict_ids,
         v.finished_at AS verified_at, v.ok AS verify_ok, v.missing AS verify_missing,
         v.differing AS verify_differing, v.repaired AS verify_repaired
       FROM listed LEFT JOIN ${s}.cursors c USING (source) LEFT JOIN ${s}.leases k USING (source)
         LEFT JOIN ${s}.source_counts n USING (source) LEFT JOIN ${s}.verify_runs v USING (source)
     )
     SELECT t.*, l.* FROM totals t LEFT JOIN detail l ON true
     ORDER BY l.failures DESC, CASE WHEN l.lagging THEN l.lag_seconds END DESC NULLS LAST, l.never DESC, l.source`;
}

/** A row of statusStatement: the totals on every row, and one listed source (all null when none is). */
export interface StatusRow {
  sources: string;
  failing_n: string;
  lagging_n: string;
  never_n: string;
  matched: string;
  source: string | null;
  after_id: string | null;
  types: string[] | null;
  last_success_at: Date | null;
  events_stored: number | null;
  newest_event_at: Date | null;
  holder: string | null;
  token: string | null;
  expires_at: Date | null;
  live: boolean | null;
  failures: number | null;
  last_error: string | null;
  due_at: Date | null;
  due_later: boolean | null;
  last_turn: 'once' | 'watch' | null;
  overdue: boolean | null;
  quarantined: string | null;
  conflicts: string | null;
  conflict_ids: string | null;
  /** The source's last `feedsync verify` (verify_runs); null when it never ran. */
  verified_at: Date | null;
  verify_ok: boolean | null;
  verify_missing: number | null;
  verify_differing: number | null;
  verify_repaired: number | null;
}

/**
 * Runs statusStatement, reading leases, cursors, source_counts, quarantine,
 * conflicts and verify_runs; writes nothing. `filter` which sources it lists; `names` the sources to
 * list besides the tables' own; `only` one source alone, or null; `limit` how many to
 * list at most (null: every one); `intervalMs` SYNC_INTERVAL_MS, after which a due
 * source of `names` nobody claimed is overdue.
 */
export async function statusRows(
  store: Store,
  filter: StatusFilter,
  params: { names: readonly string[]; only: string | null; limit: number | null; intervalMs: number },
): Promise<StatusRow[]> {
  const { rows } = await store.pool.query<StatusRow>(statusStatement(store.schema, filter), [
    params.names,
    params.only,
    params.limit,
    params.intervalMs,
  ]);
  return rows;
}

/**
 * Reads quarantine and conflicts (small tables, by their index), writes nothing: the
 * sources with rows in either, which `status` lists though no other table names them.
 */
export async function sourcesWithRecords(store: Store): Promise<string[]> {
  const s = quoteSchema(store.schema);
  const { rows } = await store.pool.query<{ source: string }>(
    `SELECT DISTINCT source FROM ${s}.quarantine UNION SELECT DISTINCT source FROM ${s}.conflicts`,
  );
  return rows.map((r) => r.source);
}

/** How many sources are in each state. */
export interface FleetCounts {
  sources: number;
  failing: number;
  lagging: number;
  neverSucceeded: number;
}

/** One of the worst sources: what its per-source gauges show. */
export interface WorstSource {
  source: string;
  failures: number;
  /** Null while nothing is stored. */
  lagSeconds: number | null;
  /** Unix seconds; null before its first success. */
  lastSuccessSeconds: number | null;
}

/**
 * The states of `sources` counted, and the worst of them: up to `k` failing (most
 * failures in a row first), `k` most lagging and `k` longest without a success, each
 * source once (at most 3k). One statement, whatever the number of sources.
 */
export async function fleetStates(
  store: Store,
  sources: readonly string[],
  k: number,
): Promise<{ counts: FleetCounts; worst: WorstSource[] }> {
  const { rows } = await store.pool.query<{ counts: FleetCounts; worst: WorstSource[] }>(
    `WITH st AS MATERIALIZED (${sourceStatesSql(store.schema, 'SELECT unnest($1::text[]) AS source')}),
     worst AS (
       (SELECT source FROM st WHERE failing ORDER BY failures DESC, source LIMIT $2)
       UNION (SELECT source FROM st WHERE lag_seconds IS NOT NULL ORDER BY lag_seconds DESC, source LIMIT $2)
       UNION (SELECT source FROM st WHERE NOT never ORDER BY last_success_at, source LIMIT $2)
     )
     SELECT (SELECT json_build_object('sources', count(*), 'failing', count(*) FILTER (WHERE failing),
               'lagging', count(*) FILTER (WHERE lagging), 'neverSucceeded', count(*) FILTER (WHERE never))
             FROM st) AS counts,
       (SELECT coalesce(json_agg(json_build_object('source', source, 'failures', failures,
               'lagSeconds', greatest(0, lag_seconds),
               'lastSuccessSeconds', extract(epoch FROM last_success_at)::float8) ORDER BY source), '[]')
        FROM st WHERE source IN (SELECT source FROM worst)) AS worst`,
    [sources, k],
  );
  return rows[0]!;
}

/** Each of `sources` with the value `select` gives it (a subquery over `src`); sources without one left out. */
async function perSource(
  store: Store,
  sources: readonly string[],
  select: string,
): Promise<ReadonlyMap<string, number>> {
  const { rows } = await store.pool.query<{ source: string; value: number | null }>(
    `SELECT src AS source, (${select}) AS value FROM unnest($1::text[]) AS src`,
    [sources],
  );
  return new Map(rows.flatMap((r) => (r.value === null ? [] : [[r.source, r.value] as const])));
}

/**
 * Reads events, writes nothing: for each of `sources`, seconds from its newest stored
 * event's created_at to now, one index probe a source. An event dated in the future is
 * left out; a source with nothing stored is absent.
 */
export function newestEventLagSeconds(
  store: Store,
  sources: readonly string[],
): Promise<ReadonlyMap<string, number>> {
  return perSource(
    store,
    sources,
    `SELECT extract(epoch FROM now() - max(created_at))::float8 FROM ${quoteSchema(store.schema)}.events e
      WHERE e.source = src AND e.created_at <= now()`,
  );
}

/**
 * Reads cursors, writes nothing: for each of `sources`, when it last caught up (Unix
 * seconds); a source that never did, or has no cursor, is absent.
 */
export function lastSuccessSeconds(
  store: Store,
  sources: readonly string[],
): Promise<ReadonlyMap<string, number>> {
  return perSource(
    store,
    sources,
    `SELECT extract(epoch FROM last_success_at)::float8 FROM ${quoteSchema(store.schema)}.cursors c WHERE c.source = src`,
  );
}
