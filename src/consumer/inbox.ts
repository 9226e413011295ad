import type { Pool, PoolClient } from 'pg';
import { SQL_IDENTIFIER } from '../config/limits.js';
import { FeedsyncError } from '../errors.js';
import { CONSUMER_DEFAULTS } from './defaults.js';
import { milliseconds } from './options.js';
import * as sql from './statements.js';
import { inTransaction, type TransactionLimits } from './transaction.js';

/** The inbox table's name, in the schema the application names. */
export const INBOX_TABLE = 'feedsync_inbox';

/** Postgres's lock_not_available: a lock_timeout passed. */
const LOCK_NOT_AVAILABLE = '55P03';

/** `"schema".feedsync_inbox`, or a FeedsyncError (CONSUMER_BAD_OPTION) for a schema that is not a plain identifier. */
export function inboxTable(schema: string): string {
  if (!SQL_IDENTIFIER.test(schema)) {
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
  /**
   * Milliseconds the transaction (the inbox row and `fn`) may last; past it, it is rolled
   * back and withInbox rejects (CONSUMER_HANDLER_TIMEOUT). Default 30000.
   */
  timeoutMs?: number;
  /** Milliseconds a statement of the transaction waits for a lock (lock_timeout). Default 5000. */
  lockTimeoutMs?: number;
  /** Rolls the transaction back when it aborts, and withInbox rejects (CONSUMER_CLOSED). */
  signal?: AbortSignal | undefined;
}

/**
 * Creates the inbox table and its index if they are missing. Safe to run from every
 * replica at once, and while other replicas run: when both exist (the catalog says so,
 * without a lock) it does nothing, so a replica's start never queues behind a running
 * handler's transaction, nor makes the others queue behind it. Else, one transaction under
 * a transaction-scoped advisory lock (it ends with the transaction, so it holds through a
 * transaction pooler and is never left behind), which `CREATE … IF NOT EXISTS` alone is
 * not (two of them can collide on the catalog), whose statements wait for a lock at most
 * `lockTimeoutMs`: past it, a FeedsyncError (CONSUMER_LOCKED) says so. A schema that
 * exists is used as it is: creating it is asked only when it is missing, so a role
 * without CREATE on the database can migrate into one.
 */
export async function migrateInbox(
  pool: Pool,
  schema: string = CONSUMER_DEFAULTS.schema,
  opts: { lockTimeoutMs?: number } = {},
): Promise<void> {
  const table = inboxTable(schema);
  if (await isMigrated(pool, table)) return;
  const lockTimeoutMs = opts.lockTimeoutMs ?? CONSUMER_DEFAULTS.lockTimeoutMs;
  try {
    await inTransaction(
      pool,
      { lockTimeoutMs, timeoutMs: CONSUMER_DEFAULTS.handlerTimeoutMs },
      async (db) => {
        await db.query(sql.migrationLock, [schema]);
        const found = await db.query(sql.schemaExists, [schema]);
        if (found.rowCount === 0) await db.query(sql.createSchema(schema));
        await db.query(sql.createTable(table));
        await db.query(sql.createIndex(table));
      },
    );
  } catch (err) {
    if ((err as { code?: unknown }).code !== LOCK_NOT_AVAILABLE) throw err;
    throw new FeedsyncError(
      `migrate(): ${schema}.${INBOX_TABLE} is locked by another transaction for more than ${lockTimeoutMs} ms; gave up rather than queue in front of the other replicas' writes: try again`,
      { code: 'CONSUMER_LOCKED', cause: err },
    );
  }
}

/** True when the table and its pruning index both exist. */
async function isMigrated(pool: Pool, table: string): Promise<boolean> {
  const { rows } = await pool.query<{ has_table: boolean; has_index: boolean }>(sql.inboxObjects, [table]);
  return rows[0]?.has_table === true && rows[0].has_index;
}

/** Throws a FeedsyncError (CONSUMER_NOT_MIGRATED) when the inbox table is missing: every job would fail. */
export async function checkInbox(pool: Pool, schema: string): Promise<void> {
  const { rows } = await pool.query<{ has_table: boolean }>(sql.inboxObjects, [inboxTable(schema)]);
  if (rows[0]?.has_table !== true) {
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
 * roll back together and the error is thrown on: the next call runs `fn` again. When
 * the transaction passes `timeoutMs`, the same, with CONSUMER_HANDLER_TIMEOUT.
 * Two calls at once for one event: the second waits on the first's row and, once
 * the first commits, finds it (or gives up after `lockTimeoutMs`, to be tried again).
 */
export async function withInbox(
  pool: Pool,
  name: string,
  event: InboxKey,
  fn: (db: PoolClient) => Promise<unknown>,
  opts: InboxOptions = {},
): Promise<boolean> {
  const table = inboxTable(opts.schema ?? CONSUMER_DEFAULTS.schema);
  return inTransaction(
    pool,
    limitsOf(opts),
    async (db, recorded) => {
      if (recorded?.rowCount !== 1) return false;
      try {
        await fn(db);
      } catch (err) {
        // A throw of a string, null or undefined fails as an Error would, or BullMQ could not fail the job.
        throw err instanceof Error ? err : handlerThrew(err);
      }
      return true;
    },
    // The inbox row goes with BEGIN, in its round trip.
    (db) =>
      sql.record(
        table,
        [name, event.source, event.id].map((v) => db.escapeLiteral(v)),
      ),
  );
}

/** What a function that threw something other than an Error fails with. */
function handlerThrew(value: unknown): FeedsyncError {
  const what =
    typeof value === 'string' ? `the string ${JSON.stringify(value.slice(0, 200))}` : String(value);
  return new FeedsyncError(`the handler threw ${what}, not an Error`, {
    code: 'CONSUMER_HANDLER_THREW',
    cause: value,
  });
}

function limitsOf(opts: InboxOptions): TransactionLimits {
  return {
    timeoutMs: milliseconds('timeoutMs', opts.timeoutMs ?? CONSUMER_DEFAULTS.handlerTimeoutMs),
    lockTimeoutMs: milliseconds('lockTimeoutMs', opts.lockTimeoutMs ?? CONSUMER_DEFAULTS.lockTimeoutMs),
    signal: opts.signal,
  };
}

/**
 * Deletes up to `batch` inbox rows of `name` recorded more than `hours` ago, oldest
 * first, in a transaction bounded as a job's is. Returns how many went: fewer than
 * `batch` means none is left that old.
 */
export async function pruneInbox(
  pool: Pool,
  opts: { schema: string; name: string; hours: number; batch: number } & Partial<TransactionLimits>,
): Promise<number> {
  const table = inboxTable(opts.schema);
  return inTransaction(pool, limitsOf(opts), async (db) => {
    const { rowCount } = await db.query(sql.prune(table), [opts.name, opts.hours, opts.batch]);
    return rowCount ?? 0;
  });
}
