import { readdir } from 'node:fs/promises';

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
