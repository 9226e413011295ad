import { randomBytes } from 'node:crypto';
import pg from 'pg';

/**
 * The Postgres the tests use: `TEST_DATABASE_URL`, or the machine's own at 5432
 * (docker-compose.yml publishes one at 5433: `TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5433/test`).
 */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** TEST_DATABASE_URL with a password (or a query) added: what a test of redaction needs. */
export function testDatabaseUrlWith(parts: { password?: string; search?: string }): string {
  const url = new URL(TEST_DATABASE_URL);
  if (parts.password !== undefined) url.password = parts.password;
  if (parts.search !== undefined) url.search = parts.search;
  return url.toString();
}

/** A fresh schema name for one test file; drop it in afterAll with dropSchema. */
export function uniqueSchema(label: string): string {
  return `t_${label.replace(/[^a-z0-9]/g, '_')}_${randomBytes(4).toString('hex')}`;
}

export async function dropSchema(schema: string, url = TEST_DATABASE_URL): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}
