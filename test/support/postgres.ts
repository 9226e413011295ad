import { randomBytes } from 'node:crypto';
import pg from 'pg';

export const TEST_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';

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
