import type { Pool, PoolClient } from 'pg';
import { FeedsyncError } from '../errors.js';

/** The inbox table's name, in the schema the application names. */
export const INBOX_TABLE = 'feedsync_inbox';

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

/** `"schema".feedsync_inbox`, or a FeedsyncError (CONSUMER_BAD_OPTION) for a schema that is not a plain identifier. */
export function inboxTable(schema: string): string {
  if (!IDENTIFIER.test(schema)) {
    throw new FeedsyncError(`schema: ${JSON.stringify(schema)} is not a lowercase SQL identifier`, {
      code: 'CONSUMER_BAD_OPTION',
      exitCode: 2,
    });
  }
  return `"${schema}".${INBOX_TABLE}`;
}

/** What the inbox records of an event: enough to know it again. */
export interface InboxKey {
  readonly source: string;
  readonly id: string;
}

export interface InboxOptions {
  /** The schema of the inbox table. Default `public`. */
  schema?: string;
}

/**
 * Creates the inbox table and its index if they are missing. Safe to run from every
 * replica at once: one transaction under a transaction-scoped advisory lock (it ends
 * with the transaction, so it holds through a transaction pooler and is never left
 * behind), which `CREATE … IF NOT EXISTS` alone is not (two of them can collide on
 * the catalog). A schema that exists is used as it is: creating it is asked only
 * when it is missing, so a role without CREATE on the database can migrate into one.
 */
export async function migrateInbox(pool: Pool, schema = 'public'): Promise<void> {
  const table = inboxTable(schema);
  await inTransaction(pool, async (db) => {
    await db.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`feedsync_inbox:${schema}`]);
    const found = await db.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
    if (found.rowCount === 0) await db.query(`CREATE SCHEMA "${schema}"`);
    await db.query(
      `CREATE TABLE IF NOT EXISTS ${table} (
        consumer     text COLLATE "C" NOT NULL,
        source       text COLLATE "C" NOT NULL,
        event_id     text COLLATE "C" NOT NULL,
        processed_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (consumer, source, event_id)
      )`,
    );
    await db.query(`CREATE INDEX IF NOT EXISTS ${INBOX_TABLE}_pruning ON ${table} (consumer, processed_at)`);
  });
}

/** Throws a FeedsyncError (CONSUMER_NOT_MIGRATED) when the inbox table is missing: every job would fail. */
export async function checkInbox(pool: Pool, schema: string): Promise<void> {
  const { rows } = await pool.query<{ found: string | null }>('SELECT to_regclass($1) AS found', [
    inboxTable(schema),
  ]);
  if (rows[0]?.found == null) {
    throw new FeedsyncError(
      `the inbox table ${schema}.${INBOX_TABLE} does not exist: call migrate() before run()`,
      { code: 'CONSUMER_NOT_MIGRATED', exitCode: 2 },
    );
  }
}

/**
 * Runs `fn` once per event for the consumer `name`, whatever the number of times it
 * is called with that event: in one transaction that first records the event in the
 * inbox and runs `fn` with the transaction's client only if the row is new, then
 * commits. Returns true when `fn` ran and committed, false when the event was
 * recorded before (nothing is run). When `fn` throws, its writes and the inbox row
 * roll back together and the error is thrown on: the next call runs `fn` again.
 * Two calls at once for one event: the second waits on the first's row and, once
 * the first commits, finds it.
 */
export async function withInbox(
  pool: Pool,
  name: string,
  event: InboxKey,
  fn: (db: PoolClient) => Promise<unknown>,
  opts: InboxOptions = {},
): Promise<boolean> {
  const table = inboxTable(opts.schema ?? 'public');
  return inTransaction(pool, async (db) => {
    const recorded = await db.query(
      `INSERT INTO ${table} (consumer, source, event_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
      [name, event.source, event.id],
    );
    if (recorded.rowCount !== 1) return false;
    await fn(db);
    return true;
  });
}

/**
 * Deletes up to `batch` inbox rows of `name` recorded more than `hours` ago, oldest
 * first. Returns how many went: fewer than `batch` means none is left that old.
 */
export async function pruneInbox(
  pool: Pool,
  opts: { schema: string; name: string; hours: number; batch: number },
): Promise<number> {
  const table = inboxTable(opts.schema);
  const { rowCount } = await pool.query(
    `DELETE FROM ${table} WHERE (consumer, source, event_id) IN (
       SELECT consumer, source, event_id FROM ${table}
        WHERE consumer = $1 AND processed_at < now() - make_interval(hours => $2)
        ORDER BY processed_at LIMIT $3)`,
    [opts.name, opts.hours, opts.batch],
  );
  return rowCount ?? 0;
}

/** BEGIN, `fn`, COMMIT; ROLLBACK when anything throws. A client whose ROLLBACK failed is dropped, not reused. */
async function inTransaction<T>(pool: Pool, fn: (db: PoolClient) => Promise<T>): Promise<T> {
  const db = await pool.connect();
  let broken: Error | undefined;
  try {
    await db.query('BEGIN');
    const result = await fn(db);
    await db.query('COMMIT');
    return result;
  } catch (err) {
    await db.query('ROLLBACK').catch((rollbackFailed: Error) => {
      broken = rollbackFailed;
    });
    throw err;
  } finally {
    db.release(broken);
  }
}
