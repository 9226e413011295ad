import type {
  DatabaseIntrospector,
  MigrationResultSet,
  Migrator,
  PostgresPool,
  PostgresPoolClient,
  TableMetadata,
} from 'kysely';
import type pg from 'pg';
import { FeedsyncError } from '../errors.js';
import { advisoryKey } from './advisory-key.js';
import { quoteSchema, type Store, withClient } from './db.js';
import { MIGRATIONS_FOLDER, migrationNames } from './migration-files.js';

const MIGRATION_TABLE = 'kysely_migration';

export interface SchemaState {
  /** The last migration applied, or null on an empty schema. */
  current: string | null;
  /** The last migration this build ships. */
  latest: string;
  /** Migrations this build ships that the schema has not had yet, in order. */
  pending: string[];
}

/**
 * Creates or updates the schema to the latest migration and returns the names it
 * applied (empty when already current). One transaction does it all, schema creation
 * included, under a transaction-level advisory lock of this schema: several processes
 * at once wait for each other and then find nothing to do. Nothing outlives the
 * transaction (kysely's own migration lock is a session lock, which a transaction
 * pooler leaves behind on a pooled server connection), so it works through PgBouncer
 * in transaction mode. A failed migration rolls everything back and throws.
 */
export async function migrate(store: Store, opts: { folder?: URL } = {}): Promise<{ applied: string[] }> {
  const quotedSchema = quoteSchema(store.schema);
  return withClient(store, async (client) => {
    const [k1, k2] = advisoryKey('feedsync.migrate', store.schema);
    // kysely's migrator is loaded here only: a run's own statements are plain SQL, and its
    // modules are a third of a run's start-up.
    const { Kysely, Migrator, PostgresAdapter, PostgresDialect } = await import('kysely');
    const { SqlMigrationProvider } = await import('./sql-migration-provider.js');
    /** The migrator's lock is ours, taken in the transaction it runs in. */
    class InTransactionAdapter extends PostgresAdapter {
      override async acquireMigrationLock(): Promise<void> {}
      override async releaseMigrationLock(): Promise<void> {}
    }
    class InTransactionDialect extends PostgresDialect {
      override createAdapter(): InstanceType<typeof PostgresAdapter> {
        return new InTransactionAdapter();
      }
      // kysely's own introspector reads the tables and columns of every schema of the
      // database, and fails when another client drops one meanwhile; the migrator only
      // asks whether this schema and its tables exist.
      override createIntrospector(): DatabaseIntrospector {
        const tables = async (): Promise<TableMetadata[]> => {
          const { rows } = await client.query<{ name: string }>(
            'SELECT tablename AS name FROM pg_catalog.pg_tables WHERE schemaname = $1',
            [store.schema],
          );
          return rows.map(({ name }) => ({ name, schema: store.schema, isView: false, columns: [] }));
        };
        return {
          getSchemas: async () => {
            const { rows } = await client.query<{ name: string }>(
              'SELECT nspname AS name FROM pg_catalog.pg_namespace WHERE nspname = $1',
              [store.schema],
            );
            return rows;
          },
          getTables: tables,
          getMetadata: async () => ({ tables: await tables() }),
        };
      }
    }
    const db = new Kysely<unknown>({ dialect: new InTransactionDialect({ pool: singleClientPool(client) }) });
    const migrator = new Migrator({
      db,
      provider: new SqlMigrationProvider({ quotedSchema, folder: opts.folder ?? MIGRATIONS_FOLDER }),
      migrationTableSchema: store.schema,
      migrationTableName: MIGRATION_TABLE,
      // Our transaction, not one of its own: the lock and every migration commit together.
      disableTransactions: true,
    });
    const { error, results = [] } = await migrateRetryingRaces(migrator, store.schema, async (step) => {
      if (step === 'begin') {
        await client.query('BEGIN');
        await client.query('SELECT pg_advisory_xact_lock($1, $2)', [k1, k2]);
      } else await client.query(step === 'commit' ? 'COMMIT' : 'ROLLBACK');
    });
    if (error !== undefined) {
      const failed = results.find((r) => r.status === 'Error')?.migrationName;
      throw new FeedsyncError(
        `migration ${failed ?? 'setup'} failed in schema ${store.schema}: ${messageOf(error)}`,
        { code: 'MIGRATION_FAILED', cause: error },
      );
    }
    return { applied: results.filter((r) => r.status === 'Success').map((r) => r.migrationName) };
  });
}

/** Where the schema stands against the migrations this build ships. Changes nothing. */
export async function schemaState(store: Store, opts: { folder?: URL } = {}): Promise<SchemaState> {
  const names = await migrationNames(opts.folder ?? MIGRATIONS_FOLDER);
  const latest = names.at(-1);
  if (latest === undefined) throw new Error('no migrations found');
  const table = `${quoteSchema(store.schema)}.${MIGRATION_TABLE}`;
  const { rows: exists } = await store.pool.query<{ found: boolean }>(
    'SELECT to_regclass($1) IS NOT NULL AS found',
    [table],
  );
  const applied = new Set<string>();
  if (exists[0]?.found) {
    const { rows } = await store.pool.query<{ name: string }>(`SELECT name FROM ${table}`);
    for (const row of rows) applied.add(row.name);
  }
  const current = [...applied].sort().at(-1) ?? null;
  return { current, latest, pending: names.filter((n) => !applied.has(n)) };
}

/** What a catalog scan sees when another client drops a schema, a table or a column during it. */
const FOREIGN_DROP_CODES = new Set(['3F000', '42P01', '42703']);

/**
 * kysely's Migrator looks for its table among the tables (and their columns) of every
 * schema; a schema, table or column that another client drops at that moment fails
 * the look-up ("schema … does not exist", "relation … does not exist", "column … of
 * relation … does not exist"). Nothing of ours changed: roll back and try again, lock
 * and all.
 */
async function migrateRetryingRaces(
  migrator: Migrator,
  schema: string,
  tx: (step: 'begin' | 'commit' | 'rollback') => Promise<void>,
): Promise<MigrationResultSet> {
  for (let attempt = 1; ; attempt++) {
    await tx('begin');
    const outcome = await migrator.migrateToLatest();
    if (outcome.error === undefined) {
      await tx('commit');
      return outcome;
    }
    await tx('rollback');
    const err = outcome.error as { code?: string; message?: string };
    const foreign = FOREIGN_DROP_CODES.has(err.code ?? '') && !String(err.message).includes(`"${schema}"`);
    if (!foreign || attempt >= 3) return outcome;
  }
}

/** A kysely pool that always hands out the one client it was given, and never closes it. */
function singleClientPool(client: pg.PoolClient): PostgresPool {
  const shared: PostgresPoolClient = {
    query: client.query.bind(client) as PostgresPoolClient['query'],
    release: () => {},
  };
  return { connect: async () => shared, end: async () => {} };
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
