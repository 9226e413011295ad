import type { ColumnType, Generated, Kysely } from 'kysely';
import pg from 'pg';
import { CONFIG_DEFAULTS } from '../config/config-defaults.js';
import { SQL_IDENTIFIER } from '../config/limits.js';
import type { Logger } from '../logger.js';
import { boundedClient } from './bounded-client.js';

/** A timestamptz column: read as a Date, written as a Date or an ISO string. */
type Timestamp<W = never> = ColumnType<Date, Date | string | W, Date | string | W>;
/** A timestamptz column the database fills in when the insert leaves it out. */
type DefaultTimestamp = ColumnType<Date, Date | string | undefined, Date | string>;
/** A jsonb column: read as parsed JSON, written as JSON text. */
type Json = ColumnType<unknown, string, string>;
type TextArray = ColumnType<string[] | null, readonly string[] | null | undefined, readonly string[] | null>;

export interface EventsTable {
  source: string;
  id: string;
  type: string;
  created_at: Timestamp;
  data: Json;
  received_via: 'feed' | 'webhook';
  received_at: DefaultTimestamp;
}

export interface CursorsTable {
  source: string;
  after_id: string | null;
  /** Full type names; null means every type. */
  types: TextArray;
  updated_at: DefaultTimestamp;
  last_success_at: Timestamp<null | undefined> | null;
  /** The kind of API key the cursor was built with (migrations/0012); null: not recorded yet. */
  key_kind: 'test' | 'live' | null;
  /** The id before the cursor's event, where a turn's first request reads from (migrations/0018). */
  check_before: string | null;
  /** A digest of the cursor's event as stored (sync/cursor-check.ts); null: nothing to check. */
  check_digest: string | null;
}

/** Per source, kept by the statements that store and prune events (migrations/0010_source_counts.sql). */
export interface SourceCountsTable {
  source: string;
  events_stored: ColumnType<string, number | undefined, number>;
  newest_event_at: Timestamp<null> | null;
}

export type EmailStatusValue = 'sent' | 'delivered' | 'bounced' | 'failed' | 'complained';

export interface EmailStatusTable {
  source: string;
  email_id: string;
  status: EmailStatusValue;
  last_event_id: string;
  last_event_at: Timestamp;
  sent_at: Timestamp<null> | null;
  delivered_at: Timestamp<null> | null;
  bounced_at: Timestamp<null> | null;
  complained_at: Timestamp<null> | null;
  failed_at: Timestamp<null> | null;
  recipients: TextArray;
  /** The event `recipients` came from (the earliest with a non-empty `to`). */
  recipients_event_id: string | null;
  recipients_event_at: Timestamp<null> | null;
  updated_at: DefaultTimestamp;
}

export type ContactStatusValue = 'subscribed' | 'unsubscribed';

/** The latest contact event of each address (by created_at, then id). */
export interface ContactStatusTable {
  source: string;
  /** data.email as address_key() keys it (address-key.ts). */
  email: string;
  status: ContactStatusValue;
  last_event_id: string;
  last_event_at: Timestamp;
  /** What the row ranks by: last_event_at, or its arrival plus the clock skew when dated later. */
  ranked_at: Timestamp;
  updated_at: DefaultTimestamp;
}

export type SuppressionReason = 'bounced' | 'complained' | 'unsubscribed';

/** An address not to send to from this source, and the event that decided it (docs/DATA.md). */
export interface SuppressionsTable {
  source: string;
  /** A recipient or a contact's email as address_key() keys it (address-key.ts); one row per reason. */
  address: string;
  reason: SuppressionReason;
  event_id: string;
  /** The created_at of that event. */
  at: Timestamp;
  updated_at: DefaultTimestamp;
}

export interface OutboxTable {
  /** bigserial: pg returns int8 as a string, which keeps every value exact. */
  seq: Generated<string>;
  source: string;
  event_id: string;
  queue: string;
  job_name: string;
  /** A copy of the job data in rows written before schema version 3; NULL since (the relay reads the event). */
  payload: Json | null;
  created_at: DefaultTimestamp;
  published_at: Timestamp<null | undefined> | null;
}

export interface QuarantineTable {
  id: Generated<string>;
  source: string;
  raw: string;
  /** Lowercase hex SHA-256 of `raw`; unique per source. */
  raw_sha256: string;
  reason: string;
  received_at: DefaultTimestamp;
}

/**
 * An event id served again with other content, one row per id: the first version stays
 * in events, the row holds the newest other one.
 */
export interface ConflictsTable {
  id: Generated<string>;
  source: string;
  event_id: string;
  /** Lowercase hex SHA-256 of the kept version and of this one (the newest other). */
  first_sha256: string;
  second_sha256: string;
  /** This version: {id, type, created_at (UTC), data}; the hashes are of `raw::text`. */
  raw: unknown;
  received_via: 'feed' | 'webhook';
  /** When the newest version arrived. */
  received_at: DefaultTimestamp;
  /** Other versions recorded under this id, the replaced ones included (int8 as text). */
  versions_seen: Generated<string>;
}

/**
 * Who holds each source and when it is next due, one row per source
 * (migrations/0004_leases.sql; the statements are plain SQL, lease.ts).
 */
export interface LeasesTable {
  source: string;
  /** Host name and pid of the holder; null while nobody holds it. */
  holder: string | null;
  /** The fencing token, 0 before the first holder; int8 as text. */
  token: ColumnType<string, number | undefined, number>;
  /** The holding ends then unless renewed; null while free. */
  expires_at: Timestamp<null> | null;
  /** When the source is next due in watch mode; null: due now. */
  due_at: Timestamp<null> | null;
  /** Turns in a row that failed; 0 after a good one. */
  failures: Generated<number>;
  /** Why the last turn failed; null after a good one. */
  last_error: string | null;
  taken_at: Timestamp<null> | null;
  /** Whether the last turn was a once run's or a watch's (migrations/0018); null: not recorded. */
  last_turn: 'once' | 'watch' | null;
}

/** A source name `sources rename` or `sources retire` took out of the fleet (migration 0015). */
export interface RetiredSourcesTable {
  source: string;
  /** Its name now, for a rename; null for a retire. */
  renamed_to: string | null;
  retired_at: Timestamp;
}

/** The last `feedsync verify` of each source (migration 0017), for `status`. */
export interface VerifyRunsTable {
  source: string;
  finished_at: Timestamp;
  missing: number;
  differing: number;
  repaired: Generated<number>;
  /** int8 as text. */
  checked: ColumnType<string, number, number>;
  ok: boolean;
}

/** One account's request budget, shared by every replica (migrations/0016_request_budgets.sql; src/budget/). */
export interface RequestBudgetsTable {
  /** A SHA-256 of the account's API key (src/budget/request-budgets.ts accountOf), never the key. */
  account: string;
  /** The first moment no replica has reserved a request slot for yet. */
  next_at: Timestamp;
}

/**
 * The tables of DATABASE_SCHEMA, for kysely: every table the migrations make, with
 * every column (test/store/schema-snapshot.test.ts checks both ways).
 */
export interface Database {
  events: EventsTable;
  cursors: CursorsTable;
  leases: LeasesTable;
  source_counts: SourceCountsTable;
  email_status: EmailStatusTable;
  contact_status: ContactStatusTable;
  suppressions: SuppressionsTable;
  outbox: OutboxTable;
  quarantine: QuarantineTable;
  conflicts: ConflictsTable;
  retired_sources: RetiredSourcesTable;
  verify_runs: VerifyRunsTable;
  request_budgets: RequestBudgetsTable;
}

/** A connection pool bound to one schema. */
export interface Store {
  /** The pool every statement runs on, and dedicated connections come from. */
  readonly pool: pg.Pool;
  /** DATABASE_SCHEMA, a checked lowercase identifier. */
  readonly schema: string;
  /**
   * The server's deadline, in ms, for each statement of a transaction of feedsync's own
   * (inTransaction's `SET LOCAL statement_timeout`): a tenth under the client's
   * DATABASE_STATEMENT_TIMEOUT_MS, so that Postgres cancels and rolls back a statement
   * before the client gives up on it, and nothing the client gave up commits later.
   */
  readonly serverTimeoutMs: number;
  /** Ends the pool. Safe to call twice. */
  close(): Promise<void>;
}

/** What StoreOptions default to. */
export const STORE_DEFAULTS = Object.freeze({
  /** Connections: the applier, the relay, lease claims and renewals, one spare (no connection holds a source). */
  max: 4,
  /** What pg_stat_activity shows, so that an operator tells feedsync's sessions apart. */
  applicationName: 'feedsync',
});

export interface StoreOptions {
  /** Connection string (DATABASE_URL). */
  url: string;
  /** Schema of every table (DATABASE_SCHEMA): a lowercase SQL identifier. */
  schema: string;
  /** Pool size. Default: STORE_DEFAULTS.max. */
  max?: number;
  /** `application_name` shown in pg_stat_activity. Default: STORE_DEFAULTS.applicationName. */
  applicationName?: string;
  /** DATABASE_CONNECT_TIMEOUT_MS: how long one new connection may take, start-up included. Default: the configuration's. */
  connectTimeoutMs?: number;
  /** DATABASE_STATEMENT_TIMEOUT_MS: how long one statement may wait for its answer. Default: the configuration's. */
  statementTimeoutMs?: number;
  /** Where errors of idle pooled connections are reported (they never crash the process). */
  logger?: Logger;
  /** An idle pool does not keep the process alive (a pool nobody closes: the request budgets'). Default false. */
  allowExitOnIdle?: boolean;
}

/** The schema name as a quoted SQL identifier, after checking it is a plain lowercase one. */
export function quoteSchema(schema: string): string {
  if (!SQL_IDENTIFIER.test(schema))
    throw new Error(`not a lowercase SQL identifier: ${JSON.stringify(schema)}`);
  return `"${schema}"`;
}

export function createStore(opts: StoreOptions): Store {
  quoteSchema(opts.schema);
  const connectTimeoutMs = opts.connectTimeoutMs ?? CONFIG_DEFAULTS.DATABASE_CONNECT_TIMEOUT_MS;
  const statementTimeoutMs = opts.statementTimeoutMs ?? CONFIG_DEFAULTS.DATABASE_STATEMENT_TIMEOUT_MS;
  const pool = new pg.Pool({
    connectionString: opts.url,
    max: opts.max ?? STORE_DEFAULTS.max,
    application_name: opts.applicationName ?? STORE_DEFAULTS.applicationName,
    Client: boundedClient(opts.url, connectTimeoutMs, statementTimeoutMs, (where) =>
      opts.logger?.warn(
        { where },
        `waiting for Postgres at ${where} (DATABASE_URL) to answer; giving up after ${connectTimeoutMs} ms (DATABASE_CONNECT_TIMEOUT_MS)`,
      ),
    ),
    // A lock holder must notice a dead peer even when it sends nothing for a while.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    ...(opts.allowExitOnIdle ? { allowExitOnIdle: true, idleTimeoutMillis: 1_000 } : {}),
  });
  // Without a listener, an idle connection that the server closes would crash the process.
  pool.on('error', (err) => opts.logger?.warn({ err }, 'idle Postgres connection failed'));
  let closing: Promise<void> | undefined;
  return {
    pool,
    schema: opts.schema,
    serverTimeoutMs: Math.max(1, Math.floor(statementTimeoutMs * 0.9)),
    close() {
      closing ??= pool.ended ? Promise.resolve() : pool.end();
      return closing;
    },
  };
}

const builders = new WeakMap<Store, Promise<Kysely<Database>>>();

/**
 * A kysely query builder over the store's pool, scoped to its schema, for tools and
 * tests. Loaded on first use: the worker's own statements are plain SQL, and kysely's
 * modules are a third of a run's start-up (docs/BENCHMARKS.md, cold start).
 */
export function queryBuilder(store: Store): Promise<Kysely<Database>> {
  let builder = builders.get(store);
  if (!builder) {
    builder = import('kysely').then(({ Kysely, PostgresDialect }) =>
      new Kysely<Database>({ dialect: new PostgresDialect({ pool: store.pool }) }).withSchema(store.schema),
    );
    builders.set(store, builder);
  }
  return builder;
}

/** Settings of one transaction: names of Postgres settings and their values (constants of feedsync's own). */
export type LocalSettings = Readonly<Record<string, string | number>>;

/**
 * `BEGIN` and the transaction's settings, one round trip and two statements: every
 * setting in one SELECT of `set_config(…, true)` (what `SET LOCAL` does), where one
 * `SET LOCAL` each would be a statement each, counted by an idle Postgres.
 */
export function beginWith(settings: LocalSettings): string {
  const sets = Object.entries(settings).map(([name, value]) => `set_config('${name}', '${value}', true)`);
  return `BEGIN; SELECT ${sets.join(', ')}`;
}

/**
 * Runs `fn` in a transaction on a client of its own (withClient) whose every statement
 * Postgres cancels past the store's serverTimeoutMs. Local to it, not a session setting
 * nor a start-up option: it passes a transaction pooler and ends with the transaction.
 * `settings` are more settings of the transaction, set with it.
 */
export function inTransaction<T>(
  store: Store,
  fn: (client: pg.PoolClient) => Promise<T>,
  settings: LocalSettings = {},
): Promise<T> {
  return withClient(store, async (client) => {
    await client.query(beginWith({ statement_timeout: store.serverTimeoutMs, ...settings }));
    const value = await fn(client);
    await client.query('COMMIT');
    return value;
  });
}

/**
 * Runs `fn` on a pooled client of its own. If Postgres ends the session meanwhile, a
 * checked-out client without a listener would crash the process, so the error is kept
 * and thrown instead. A client `fn` failed on is dropped, not pooled: a transaction may
 * still be open on it.
 */
export async function withClient<T>(store: Store, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await store.pool.connect();
  let broken: Error | undefined;
  const onError = (err: Error): void => {
    broken = err;
  };
  client.on('error', onError);
  try {
    return await fn(client);
  } catch (err) {
    // The session's own error (it ended) says more than the query's that failed with it.
    const cause = broken ?? err;
    broken ??= err instanceof Error ? err : new Error(String(err));
    throw cause;
  } finally {
    client.off('error', onError);
    client.release(broken);
  }
}
