import { readdir, readFile } from 'node:fs/promises';
import { type Kysely, type Migration, type MigrationProvider, sql } from 'kysely';

/** The folder of numbered SQL files, from src/store/ (tests) and dist/store/ (built) alike. */
export const MIGRATIONS_FOLDER = new URL('../../migrations/', import.meta.url);

const FILE_PATTERN = /^(\d{4,}_[a-z0-9_]+)\.sql$/;

/** Names of the migrations in `folder` (file names without `.sql`), sorted. */
export async function migrationNames(folder: URL = MIGRATIONS_FOLDER): Promise<string[]> {
  const files = await readdir(folder);
  return files
    .map((file) => FILE_PATTERN.exec(file)?.[1])
    .filter((name): name is string => name !== undefined)
    .sort();
}

/**
 * Reads plain SQL migrations (`0001_init.sql`, …) from a folder. Each runs with
 * `SET LOCAL search_path` to the target schema, so the files name tables without a
 * schema and stay plain SQL. The migrator runs them inside its transaction.
 */
export class SqlMigrationProvider implements MigrationProvider {
  readonly #quotedSchema: string;
  readonly #folder: URL;

  constructor(opts: { quotedSchema: string; folder?: URL }) {
    this.#quotedSchema = opts.quotedSchema;
    this.#folder = opts.folder ?? MIGRATIONS_FOLDER;
  }

  async getMigrations(): Promise<Record<string, Migration>> {
    const migrations: Record<string, Migration> = {};
    for (const name of await migrationNames(this.#folder)) {
      const text = await readFile(new URL(`${name}.sql`, this.#folder), 'utf8');
      migrations[name] = {
        // biome-ignore lint/suspicious/noExplicitAny: the migrator hands every migration a Kysely<any>
        up: async (db: Kysely<any>) => {
          await sql.raw(`SET LOCAL search_path TO ${this.#quotedSchema}`).execute(db);
          // No parameters: pg sends it as a simple query, so one file may hold many statements.
          await sql.raw(text).execute(db);
        },
      };
    }
    return migrations;
  }
}
