import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { TEST_DATABASE_URL } from './postgres.js';
import { ensureTestDatabase } from './test-database.js';

// A database of this file's own on the shared server, dropped after.
const name = `feedsync_t_${randomBytes(4).toString('hex')}`;
const url = new URL(TEST_DATABASE_URL);
url.pathname = `/${name}`;

async function onServer<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const admin = new URL(TEST_DATABASE_URL);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

afterAll(() => onServer((c) => c.query(`DROP DATABASE IF EXISTS "${name}"`)));

describe('ensureTestDatabase (the suites’ global setup)', () => {
  it('creates the database the URL names when there is none, and leaves it when there is, two at once included', async () => {
    await Promise.all([ensureTestDatabase(url.toString()), ensureTestDatabase(url.toString())]);
    await ensureTestDatabase(url.toString());
    const client = new pg.Client({ connectionString: url.toString() });
    await client.connect();
    try {
      expect((await client.query('SELECT current_database() AS db')).rows).toEqual([{ db: name }]);
    } finally {
      await client.end();
    }
  });
});
