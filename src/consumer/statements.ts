/**
 * Every statement the consumer runs, on its one table in the application's database: the
 * consumer's own data layer, beside src/store/ (which owns feedsync's schema and nothing
 * of the application's). `table` is always inboxTable()'s checked, quoted name.
 *
 *   feedsync_inbox(consumer, source, event_id, processed_at)
 *     primary key (consumer, source, event_id): one row per event per consumer name
 *     feedsync_inbox_pruning (consumer, processed_at): the prune's oldest-first scan
 *
 *   inboxObjects   what of the table and its index the catalog holds (no lock taken):
 *                  migrate() runs no DDL when both exist
 *   migrationLock  a transaction-scoped advisory lock, so that replicas migrating at
 *                  once do not collide on the catalog (it ends with the transaction)
 *   schemaExists / createSchema / createTable / createIndex   migrate()'s DDL
 *   beginLimited   BEGIN with the transaction's deadlines (local settings: they end with it)
 *   commit / rollback
 *   record         the inbox row of an event, or nothing when it is there already (sent with BEGIN)
 *   prune          up to a batch of a consumer's rows older than some hours, oldest first
 */

/** $1: the table's name. Whether the table and its pruning index exist, read from the catalog. */
export const inboxObjects = `SELECT to_regclass($1) IS NOT NULL AS has_table,
                                    to_regclass($1 || '_pruning') IS NOT NULL AS has_index`;

/** $1: the schema's name, the lock's key. */
export const migrationLock = `SELECT pg_advisory_xact_lock(hashtext('feedsync_inbox:' || $1))`;

/** $1: the schema's name. */
export const schemaExists = 'SELECT 1 FROM pg_namespace WHERE nspname = $1';

export const createSchema = (schema: string): string => `CREATE SCHEMA "${schema}"`;

export const createTable = (table: string): string =>
  `CREATE TABLE IF NOT EXISTS ${table} (
     consumer     text COLLATE "C" NOT NULL,
     source       text COLLATE "C" NOT NULL,
     event_id     text COLLATE "C" NOT NULL,
     processed_at timestamptz NOT NULL DEFAULT now(),
     PRIMARY KEY (consumer, source, event_id)
   )`;

export const createIndex = (table: string): string =>
  `CREATE INDEX IF NOT EXISTS feedsync_inbox_pruning ON ${table} (consumer, processed_at)`;

/**
 * BEGIN, then the transaction's own limits, in one round trip: how long a statement
 * waits for a lock, how long one runs, and how long the transaction may sit idle (a
 * process paused while it holds the transaction: the server ends it). Whole milliseconds.
 */
/**
 * The server ends an idle transaction a little after the consumer's own deadline: the
 * consumer ends its connection first, so the server's FATAL never reaches the
 * application's pool (pg-pool re-emits it there, and a pool without an error listener
 * would end the process); the server's timeout stays for a process that cannot act
 * (frozen, paused).
 */
const IDLE_BACKSTOP_MS = 2_000;

/**
 * The three set in one statement (set_config with is_local, as SET LOCAL does), not three:
 * every job and every prune batch runs it, and each statement counts for a shared or
 * serverless Postgres.
 */
export const beginLimited = (limits: { lockTimeoutMs: number; timeoutMs: number }): string =>
  `BEGIN; SELECT set_config('lock_timeout', '${limits.lockTimeoutMs}', true),` +
  ` set_config('statement_timeout', '${limits.timeoutMs}', true),` +
  ` set_config('idle_in_transaction_session_timeout', '${limits.timeoutMs + IDLE_BACKSTOP_MS}', true)`;

export const commit = 'COMMIT';
export const rollback = 'ROLLBACK';

/**
 * The consumer, the source and the event id, each a quoted literal (escapeLiteral's), so
 * that the statement can ride in BEGIN's simple-protocol round trip, which takes no
 * parameters; one row affected when the event is new.
 */
export const record = (table: string, [consumer, source, eventId]: readonly string[]): string =>
  `INSERT INTO ${table} (consumer, source, event_id) VALUES (${consumer}, ${source}, ${eventId}) ON CONFLICT DO NOTHING`;

/** $1 consumer, $2 hours, $3 batch: deletes up to $3 rows of $1 older than $2 hours, oldest first. */
export const prune = (table: string): string =>
  `DELETE FROM ${table} WHERE (consumer, source, event_id) IN (
     SELECT consumer, source, event_id FROM ${table}
      WHERE consumer = $1 AND processed_at < now() - make_interval(hours => $2)
      ORDER BY processed_at LIMIT $3)`;
