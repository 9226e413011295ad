import { execFile } from 'node:child_process';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import { type ChildResult, freePort, runCli } from '../support/processes.js';
import { deletePrefix, TEST_REDIS_URL, uniquePrefix } from '../support/redis.js';

// Names of this file's own: the demo honours DATABASE_SCHEMA and QUEUE_PREFIX, so the
// test never touches the default feedsync_demo / feedsync-demo of someone's own demo.
const schema = uniqueSchema('demo');
const prefix = uniquePrefix('demo');
const foreignSchema = uniqueSchema('demo_foreign');
// The default DATABASE_URL's database (`postgres`), where the demo goes without one.
const defaultSchema = uniqueSchema('demo_default');
const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/postgres';
const foreignPrefix = uniquePrefix('demo-foreign');
const env = {
  PATH: process.env.PATH ?? '',
  DATABASE_URL: TEST_DATABASE_URL,
  REDIS_URL: TEST_REDIS_URL,
  DATABASE_SCHEMA: schema,
  QUEUE_PREFIX: prefix,
};

afterAll(async () => {
  await dropSchema(schema);
  await dropSchema(foreignSchema);
  await dropSchema(defaultSchema, DEFAULT_DATABASE_URL);
  await deletePrefix(prefix);
  await deletePrefix(foreignPrefix);
});

async function sql(text: string): Promise<unknown[]> {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  try {
    return (await client.query(text)).rows;
  } finally {
    await client.end();
  }
}

/**
 * `npm run demo`, the README's first command, as a user runs it. `--ignore-scripts`
 * skips only its `predemo` build: `npm test` built already, and a rebuild would rewrite
 * dist/ under the test files running beside this one.
 */
function npmRunDemo(extra: Record<string, string>): Promise<ChildResult> {
  return new Promise((resolve) => {
    execFile(
      'npm',
      ['run', '--silent', '--ignore-scripts', 'demo'],
      { env: { ...env, ...extra }, timeout: 60_000 },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : null;
        resolve({ code, signal: err?.signal ?? null, stdout, stderr });
      },
    );
  });
}

describe('feedsync demo', () => {
  it('says what it drops, sends through its own simulator, syncs, and shows nothing was sent again', async () => {
    for (let run = 1; run <= 2; run++) {
      // The second run drops what the first made: its own schema and keys.
      const { code, stdout, stderr } = run === 1 ? await npmRunDemo({}) : await runCli(['demo'], env, 60_000);
      expect(code, stderr).toBe(0);
      expect(stdout.split('\n')[0]).toBe(
        `using the Postgres at ${new URL(TEST_DATABASE_URL).host}: DATABASE_URL names it; ` +
          `the queues in the Redis at ${new URL(TEST_REDIS_URL).host}`,
      );
      expect(stdout).toContain(
        `0. the demo starts afresh: it drops schema ${schema} in the Postgres at ${new URL(TEST_DATABASE_URL).host} ` +
          `and deletes the Redis keys that start with "${prefix}:" in the Redis at ${new URL(TEST_REDIS_URL).host} (`,
      );
      expect(stdout).toContain('13 events stored');
      expect(stdout).toContain('a second run stores 0 new events');
      expect(stdout).toMatch(new RegExp(`${prefix}:email-events\\s+\\{"waiting":11`));
      expect(stdout).toMatch(new RegExp(`${prefix}:contact-events\\s+\\{"waiting":2`));
      expect(stdout).toContain(
        `6. a consumer (createConsumer, feedsync/consumer) took 13 jobs and applied 13 events once each to its own table ${schema}.app_events`,
      );
      expect(stdout).toMatch(/^ {3}email\.sent {12}5$/m);
      expect(stdout).toContain('5 before the sync, 5 after: no mail was sent again');
      // The suppressed addresses the demo made, on its output.
      expect(stdout).toMatch(
        /suppressions table[^\n]*\n {3}bounced@example\.com +bounced +evt_\d+\n {3}complained@example\.com +complained +evt_\d+\n {3}old\.reader@example\.com +unsubscribed +evt_\d+\n/,
      );
      expect(stdout).toMatch(/ {3}new\.reader@example\.com +subscribed\n/);
    }
    // Two demos, each with a consumer that starts and stops: room for a busy machine.
  }, 120_000);

  it('uses the Postgres at the default address when DATABASE_URL is unset and one answers there', async () => {
    const { DATABASE_URL: _, ...unset } = env;
    const { code, stdout, stderr } = await runCli(
      ['demo'],
      { ...unset, DATABASE_SCHEMA: defaultSchema },
      60_000,
    );
    expect(code, stderr).toBe(0);
    expect(stdout.split('\n')[0]).toBe(
      `using the Postgres at 127.0.0.1:5432: it answers at the default address; the queues in the Redis at ${new URL(TEST_REDIS_URL).host}`,
    );
    expect(stdout).toContain('5 before the sync, 5 after: no mail was sent again');
    expect(stdout).toContain(`psql -h 127.0.0.1 -U postgres -c 'SELECT * FROM ${defaultSchema}.events'`);
  }, 60_000);

  it('with Redis down, fails before it drops its schema of an earlier run', async () => {
    const [before] = (await sql(`SELECT count(*)::int AS n FROM "${schema}".events`)) as { n: number }[];
    expect(before!.n).toBeGreaterThan(0);
    const down = await runCli(
      ['demo'],
      { ...env, REDIS_URL: `redis://127.0.0.1:${await freePort()}` },
      60_000,
    );
    expect(down.code, down.stderr).not.toBe(0);
    expect(down.stderr).toContain('REDIS_URL');
    expect(await sql(`SELECT count(*)::int AS n FROM "${schema}".events`)).toEqual([before]);
  });

  it('refuses to drop a schema or delete keys it did not make (exit 2), and leaves them', async () => {
    await sql(`CREATE SCHEMA "${foreignSchema}"; CREATE TABLE "${foreignSchema}".precious (id int)`);
    const schemaRefused = await runCli(['demo'], { ...env, DATABASE_SCHEMA: foreignSchema }, 60_000);
    expect(schemaRefused.code).toBe(2);
    expect(schemaRefused.stderr).toContain(
      `demo: schema "${foreignSchema}" holds tables the demo did not make`,
    );
    // It says only what it does: nothing is dropped, so no "drops" line.
    expect(schemaRefused.stdout).not.toContain('drops');

    const redis = new Redis(TEST_REDIS_URL);
    try {
      await redis.set(`${foreignPrefix}:app:precious`, '1');
      const prefixRefused = await runCli(['demo'], { ...env, QUEUE_PREFIX: foreignPrefix }, 60_000);
      expect(prefixRefused.code).toBe(2);
      expect(prefixRefused.stderr).toContain(
        `under the prefix "${foreignPrefix}" that the demo did not make`,
      );
      expect(prefixRefused.stdout).not.toContain('drops');
      expect(await redis.get(`${foreignPrefix}:app:precious`)).toBe('1');
    } finally {
      redis.disconnect();
    }
    expect(await sql(`SELECT count(*)::int AS n FROM "${foreignSchema}".precious`)).toEqual([{ n: 0 }]);
  });
});
