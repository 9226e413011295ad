import type pg from 'pg';
import { quoteSchema, type Store } from './db.js';

/**
 * The statements that ask whether Postgres answers, for `/readyz` and `doctor`, and
 * what `doctor` reads of the tables. None writes anything.
 *
 *   pingPostgres   `SELECT 1` on the pool: true when it answers, false on any error
 *                  (readiness says no; the cause is the loop's to log)
 *   serverPort     `inet_server_port()` on one client: the port the server itself
 *                  listens on (null over a Unix socket), to tell a pooler in between
 *   quarantined    count(*) of the schema's quarantine table: a handful of rows, read
 *                  by `doctor` alone
 *   conflictsRecorded  the schema's conflicts table summed up: rows (one per event id),
 *                  versions seen in all, and the sources they came from; for `doctor`
 */
export function pingPostgres(pool: Pick<pg.Pool, 'query'>): Promise<boolean> {
  return pool.query('SELECT 1').then(
    () => true,
    () => false,
  );
}

export async function serverPort(client: Pick<pg.Client, 'query'>): Promise<number | null> {
  const { rows } = await client.query<{ port: number | null }>('SELECT inet_server_port() AS port');
  return rows[0]?.port ?? null;
}

export async function quarantined(store: Store): Promise<number> {
  const { rows } = await store.pool.query<{ n: string }>(
    `SELECT count(*) AS n FROM ${quoteSchema(store.schema)}.quarantine`,
  );
  return Number(rows[0]?.n ?? 0);
}

export async function conflictsRecorded(
  store: Store,
): Promise<{ ids: number; versions: number; sources: string | null }> {
  const { rows } = await store.pool.query<{ n: string; versions: string; sources: string | null }>(
    `SELECT count(*) AS n, coalesce(sum(versions_seen), 0) AS versions, string_agg(DISTINCT source, ', ') AS sources
       FROM ${quoteSchema(store.schema)}.conflicts`,
  );
  return {
    ids: Number(rows[0]?.n ?? 0),
    versions: Number(rows[0]?.versions ?? 0),
    sources: rows[0]?.sources ?? null,
  };
}
