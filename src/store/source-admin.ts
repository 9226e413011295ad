import type pg from 'pg';
import { quoteSchema, type Store, withClient } from './db.js';

/** Every table with a row per source or per source's record, in the order a rename moves them. */
const SOURCE_TABLES = [
  'cursors',
  'events',
  'email_status',
  'contact_status',
  'suppressions',
  'outbox',
  'quarantine',
  'conflicts',
  'source_counts',
] as const;

/** Why a retire or a rename did nothing: the command turns it into its line. */
export type SourceRefusal =
  | { refused: 'unknown' }
  | { refused: 'held'; holder: string; expiresAt: Date }
  | { refused: 'backlog'; rows: number }
  | { refused: 'taken' };

/** What `sources retire` took away: the rows of the fleet's counts (events and records stay). */
export interface Retired {
  refused?: undefined;
  cursor: boolean;
  lease: boolean;
  quarantined: number;
  conflicts: number;
}

/** What `sources rename` moved: rows per table. */
export interface Renamed {
  refused?: undefined;
  moved: Record<(typeof SOURCE_TABLES)[number], number>;
}

/**
 * Locks the source's lease row (and cursor) for the transaction, as a worker taking it
 * would: a turn in flight holds it (FOR KEY SHARE in the apply statement) until its commit,
 * and a live lease is a turn that may commit next. Null when it is free to change.
 */
async function lockFree(client: pg.PoolClient, s: string, source: string): Promise<SourceRefusal | null> {
  const { rows: lease } = await client.query<{
    holder: string | null;
    live: boolean;
    expires_at: Date | null;
  }>(
    `SELECT holder, holder IS NOT NULL AND expires_at > now() AS live, expires_at FROM ${s}.leases
      WHERE source = $1 FOR UPDATE`,
    [source],
  );
  const { rows: cursor } = await client.query(`SELECT FROM ${s}.cursors WHERE source = $1 FOR UPDATE`, [
    source,
  ]);
  if (lease.length === 0 && cursor.length === 0) return { refused: 'unknown' };
  const row = lease[0];
  if (row?.live && row.holder !== null && row.expires_at !== null) {
    return { refused: 'held', holder: row.holder, expiresAt: row.expires_at };
  }
  return null;
}

async function inTransaction<T>(store: Store, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  return withClient(store, async (client) => {
    await client.query('BEGIN');
    try {
      const value = await fn(client);
      await client.query('COMMIT');
      return value;
    } catch (err) {
      await client.query('ROLLBACK');
      throw err;
    }
  });
}

/** Rows of the outbox not published yet: events not handed off, which a retire would strand. */
async function backlogOf(client: pg.PoolClient, s: string, source: string): Promise<number> {
  const { rows } = await client.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${s}.outbox WHERE source = $1 AND published_at IS NULL`,
    [source],
  );
  return rows[0]?.n ?? 0;
}

/**
 * Marks a name taken out of the fleet (`renamedTo` null for a retire): a worker whose
 * sources file still names it refuses it at its first turn (cursor.ts, ensureCursor)
 * instead of reading its feed again from the start.
 */
async function markRetired(client: pg.PoolClient, s: string, source: string, renamedTo: string | null) {
  await client.query(
    `INSERT INTO ${s}.retired_sources (source, renamed_to) VALUES ($1, $2)
     ON CONFLICT (source) DO UPDATE SET renamed_to = excluded.renamed_to, retired_at = now()`,
    [source, renamedTo],
  );
}

/**
 * Lifts the mark of a renamed or retired name, so that a sources file may name it again
 * for a new feed (from the feed's start). False when the name had no mark.
 */
export async function reuseSource(store: Store, source: string): Promise<boolean> {
  const s = quoteSchema(store.schema);
  const { rowCount } = await store.pool.query(`DELETE FROM ${s}.retired_sources WHERE source = $1`, [source]);
  return (rowCount ?? 0) > 0;
}

/**
 * Takes a source out of the fleet in one transaction, once no worker holds its lease:
 * deletes its lease row, cursor and source_counts row (what `status`, feedsync_sources
 * and feedsync_sources_overdue count) and its quarantine and conflicts rows (which list
 * it in `status`). Its events, email_status, contact_status, suppressions and published
 * outbox rows stay, for retention to prune. Refused while its outbox holds rows not yet
 * published. The name is marked retired (markRetired): a replica whose sources file still
 * names it refuses it instead of reading its feed again.
 */
export async function retireSource(store: Store, source: string): Promise<Retired | SourceRefusal> {
  const s = quoteSchema(store.schema);
  return inTransaction(store, async (client) => {
    const refusal = await lockFree(client, s, source);
    if (refusal) return refusal;
    const rows = await backlogOf(client, s, source);
    if (rows > 0) return { refused: 'backlog', rows };
    const count = async (table: string) =>
      (await client.query(`DELETE FROM ${s}.${table} WHERE source = $1`, [source])).rowCount ?? 0;
    const retired: Retired = {
      lease: (await count('leases')) > 0,
      cursor: (await count('cursors')) > 0,
      quarantined: await count('quarantine'),
      conflicts: await count('conflicts'),
    };
    await count('source_counts');
    await markRetired(client, s, source, null);
    return retired;
  });
}

/**
 * Renames a source in one transaction, once no worker holds its lease: its cursor, events
 * and every record of it move to `to`, so the next turn under the new name goes on from
 * the cursor instead of reading and publishing the feed again, and its suppressions guard
 * `send --source <to>`. The old lease row is deleted (the new name's is made by the
 * replicas that run it) and the old name marked renamed (markRetired). Refused when `to`
 * already has a row in any table.
 */
export async function renameSource(store: Store, from: string, to: string): Promise<Renamed | SourceRefusal> {
  const s = quoteSchema(store.schema);
  return inTransaction(store, async (client) => {
    const refusal = await lockFree(client, s, from);
    if (refusal) return refusal;
    const { rows } = await client.query<{ taken: boolean }>(
      `SELECT ${[...SOURCE_TABLES, 'leases'].map((t) => `EXISTS (SELECT FROM ${s}.${t} WHERE source = $1)`).join(' OR ')} AS taken`,
      [to],
    );
    if (rows[0]?.taken) return { refused: 'taken' };
    const moved = {} as Renamed['moved'];
    for (const table of SOURCE_TABLES) {
      const result = await client.query(`UPDATE ${s}.${table} SET source = $2 WHERE source = $1`, [from, to]);
      moved[table] = result.rowCount ?? 0;
    }
    await client.query(`DELETE FROM ${s}.leases WHERE source = $1`, [from]);
    await markRetired(client, s, from, to);
    // The history moved into `to` is a source again, whatever the name was before.
    await client.query(`DELETE FROM ${s}.retired_sources WHERE source = $1`, [to]);
    return { moved };
  });
}
