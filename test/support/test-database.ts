import pg from 'pg';
import { TEST_DATABASE_URL } from './postgres.js';

/**
 * Creates the database TEST_DATABASE_URL names when its server has none of that name
 * (a fresh machine has only `postgres`), from the server's `postgres` database. Two
 * suites starting at once may race: the loser's "already exists" is success.
 */
export async function ensureTestDatabase(url = TEST_DATABASE_URL): Promise<void> {
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.slice(1));
  if (name === '' || name === 'postgres') return;
  const maintenance = new URL(url);
  maintenance.pathname = '/postgres';
  const client = new pg.Client({ connectionString: maintenance.toString(), connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (found.rowCount === 0) {
      await client
        .query(`CREATE DATABASE "${name.replaceAll('"', '""')}"`)
        .catch((err: { code?: string }) => {
          // 42P04 duplicate_database, 23505: the same CREATE from another suite won.
          if (err.code !== '42P04' && err.code !== '23505') throw err;
        });
    }
  } finally {
    await client.end();
  }
}
