import { createRequire } from 'node:module';
import type { PostgresPoolConfig } from 'bullmq';
import pg from 'pg';
import { shorten } from '../error-summary.js';
import { FeedsyncError } from '../errors.js';

// BullMQ is loaded on first use, as the Redis publisher loads it.
const require = createRequire(import.meta.url);

/** Where BullMQ's Postgres backend keeps the queues: QUEUE_DATABASE_URL and the schema QUEUE_PREFIX names. */
export interface PgQueueSettings {
  /** QUEUE_DATABASE_URL (default DATABASE_URL). */
  readonly url: string;
  /** QUEUE_PREFIX: the schema of BullMQ's tables and functions. */
  readonly schema: string;
}

/**
 * The connection BullMQ's Postgres backend builds its own pool from. The schema goes
 * on every connection's start-up `search_path` (BullMQ's SQL names its tables
 * unqualified), and its Workers LISTEN: so this connection goes to Postgres directly or
 * through a session pooler, never through a transaction pooler.
 */
export function pgQueueConnection(
  settings: PgQueueSettings,
  opts: {
    /** Connections of the pool at most. */
    max: number;
    /** Milliseconds a new connection may take. */
    connectTimeoutMs: number;
    /** `application_name` in pg_stat_activity. */
    applicationName: string;
  },
): PostgresPoolConfig {
  return {
    connectionString: settings.url,
    schema: settings.schema,
    max: opts.max,
    connectionTimeoutMillis: opts.connectTimeoutMs,
    application_name: opts.applicationName,
    // A LISTEN connection dropped without a word is found by keepalive, and rebuilt.
    keepAlive: true,
  };
}

/**
 * Migrates the queues' schema to the version this BullMQ has (LATEST_SCHEMA_VERSION) on
 * one session: BullMQ takes a transaction-scoped advisory lock per schema first, so two
 * migrations at once run it once. Returns the version the schema is at.
 */
export async function migrateQueues(settings: PgQueueSettings, connectTimeoutMs: number): Promise<number> {
  const { runMigrations } = require('bullmq') as typeof import('bullmq');
  return withSession(settings, connectTimeoutMs, (client) => runMigrations(client, settings.schema)).catch(
    (err: unknown) => {
      throw toQueueError(err);
    },
  );
}

/**
 * Checks, with one read and no lock, that the queues' schema is migrated to a version
 * this BullMQ works with; else a QUEUE_NOT_MIGRATED error that says to run migrate.
 */
export async function assertQueueSchema(
  settings: PgQueueSettings,
  connectTimeoutMs: number,
): Promise<number> {
  const { assertSchemaCompatibility, SchemaMigrationRequiredError, SchemaVersionMismatchError } =
    require('bullmq') as typeof import('bullmq');
  try {
    return await withSession(settings, connectTimeoutMs, (client) =>
      assertSchemaCompatibility(client, settings.schema),
    );
  } catch (err) {
    if (err instanceof SchemaMigrationRequiredError) {
      throw new FeedsyncError(
        `the queues' schema "${settings.schema}" (QUEUE_PREFIX) in QUEUE_DATABASE_URL is not migrated: run \`feedsync migrate\` first`,
        { code: 'QUEUE_NOT_MIGRATED', exitCode: 2 },
      );
    }
    if (err instanceof SchemaVersionMismatchError) {
      throw new FeedsyncError(
        `the queues' schema "${settings.schema}" was migrated by a newer BullMQ (major ${err.minimumClientVersion} at least): upgrade feedsync`,
        { code: 'QUEUE_NOT_MIGRATED', exitCode: 2 },
      );
    }
    throw toQueueError(err);
  }
}

/** The migration version the queues' schema is at, and this BullMQ's; null where the schema has none. */
export async function queueSchemaVersion(
  settings: PgQueueSettings,
  connectTimeoutMs: number,
): Promise<{ version: number | null; latest: number }> {
  const { LATEST_SCHEMA_VERSION } = require('bullmq') as typeof import('bullmq');
  const version = await withSession(settings, connectTimeoutMs, async (client) => {
    const found = await client.query<{ ledger: string | null }>('select to_regclass($1)::text as ledger', [
      `"${settings.schema}".migration`,
    ]);
    if (!found.rows[0]?.ledger) return null;
    const rows = await client.query<{ version: number | null }>(
      `select max(version)::int as version from "${settings.schema}".migration`,
    );
    return rows.rows[0]?.version ?? null;
  });
  return { version, latest: LATEST_SCHEMA_VERSION };
}

/** Connections open to the queues' server now, and how many it takes (max_connections less the superusers' reserve). */
export async function connectionsInUse(
  settings: PgQueueSettings,
  connectTimeoutMs: number,
): Promise<{ used: number; max: number }> {
  return withSession(settings, connectTimeoutMs, async (client) => {
    const { rows } = await client.query<{ used: number; max: number }>(
      `SELECT (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')::int AS used,
              (current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int) AS max`,
    );
    return rows[0] ?? { used: 0, max: 0 };
  });
}

/** One session of its own on the queues' database, ended after `fn`. */
async function withSession<T>(
  settings: PgQueueSettings,
  connectTimeoutMs: number,
  fn: (client: pg.Client) => Promise<T>,
): Promise<T> {
  const client = new pg.Client({
    connectionString: settings.url,
    connectionTimeoutMillis: connectTimeoutMs,
    application_name: 'feedsync-queues',
  });
  client.on('error', () => {});
  try {
    await client.connect();
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * What the Postgres publisher throws in place of an error of pg or BullMQ: a QUEUE_ERROR
 * with the message and SQLSTATE or socket code only, never a statement's parameters
 * (job data). feedsync's own errors pass unchanged.
 */
export function toQueueError(err: unknown): Error {
  if (err instanceof FeedsyncError) return err;
  const source = err instanceof Error ? err : new Error(String(err));
  const own = (source as { code?: unknown }).code;
  const code = typeof own === 'string' ? ` (${own})` : '';
  return new FeedsyncError(
    `the queues' Postgres (QUEUE_DATABASE_URL): ${shorten(source.message || String(err))}${code}`,
    { code: 'QUEUE_ERROR' },
  );
}
