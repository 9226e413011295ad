import { readFile } from 'node:fs/promises';
import { type Kysely, type Migration, type MigrationProvider, sql } from 'kysely';
import { MIGRATIONS_FOLDER, migrationNames } from './migration-files.js';

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
