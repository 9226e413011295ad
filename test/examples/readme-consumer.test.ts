import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Queue } from 'bullmq';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import { runNode, spawnNode, waitFor } from '../support/processes.js';
import { deletePrefix, TEST_REDIS_URL, uniquePrefix } from '../support/redis.js';

// The README's consumer, as a reader pastes it into a file of a clone: saved as an .mjs
// beside the project's package.json (so `feedsync/consumer` and `pg` resolve as they do
// for the reader) and run with node, against jobs in the queues. Only its schema's name
// is changed, to one of this file's own on the shared Postgres.

const README = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const DIR = new URL(`../../.readme-consumer-${process.pid}/`, import.meta.url).pathname;
const schema = uniqueSchema('readme_consumer');
const prefix = uniquePrefix('readme-consumer');
const pool = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 2 });
const queue = new Queue('email-events', { connection: { url: TEST_REDIS_URL }, prefix });

afterAll(async () => {
  rmSync(DIR, { recursive: true, force: true });
  await queue.close();
  await pool.end();
  await dropSchema(schema);
  await deletePrefix(prefix);
});

/** The code block under "## A consumer". */
function snippet(): string {
  const section = README.split('\n## A consumer\n')[1]?.split('\n## ')[0] ?? '';
  const code = /```js\n([\s\S]*?)```/.exec(section)?.[1];
  if (!code) throw new Error('README: no js block under "## A consumer"');
  return code;
}

describe("README's consumer", () => {
  it('runs as pasted into a file of a clone: makes its schema and table, applies a bounce once', async () => {
    const code = snippet();
    const line = "const schema = 'billing';";
    expect(code.split(line)).toHaveLength(2);
    mkdirSync(DIR, { recursive: true });
    writeFileSync(`${DIR}consumer.mjs`, code.replace(line, `const schema = '${schema}';`));
    const child = spawnNode([`${DIR}consumer.mjs`], {
      APP_DATABASE_URL: TEST_DATABASE_URL,
      REDIS_URL: TEST_REDIS_URL,
      QUEUE_PREFIX: prefix,
    });
    try {
      const bounce = (jobId: string) =>
        queue.add(
          'email.bounced',
          {
            source: 'default',
            id: 'evt_1',
            type: 'email.bounced',
            created_at: '2026-01-01T00:00:00.000Z',
            data: { email_id: 'em_1', to: ['Reader@Example.com'] },
          },
          { jobId },
        );
      await bounce('default/evt_1');
      // The same event again under another job id: the inbox knows it.
      await bounce('default/evt_1-again');
      await waitFor(async () => (await queue.getCompletedCount()) === 2, {
        timeoutMs: 30_000,
        what: 'both jobs',
      });
    } finally {
      child.signal('SIGTERM');
      const exit = await child.waitExit(30_000);
      expect(exit.code, exit.stderr).toBe(0);
    }
    const { rows } = await pool.query(`SELECT address, event_id FROM "${schema}".bounced`);
    expect(rows).toEqual([{ address: 'reader@example.com', event_id: 'evt_1' }]);
    const inbox = await pool.query(`SELECT consumer, event_id FROM "${schema}".feedsync_inbox`);
    expect(inbox.rows).toEqual([{ consumer: 'billing', event_id: 'evt_1' }]);
  }, 60_000);

  it('without APP_DATABASE_URL says so in one line and exits 2', async () => {
    mkdirSync(DIR, { recursive: true });
    writeFileSync(`${DIR}unset.mjs`, snippet());
    const run = await runNode([`${DIR}unset.mjs`], {}, 20_000);
    expect(run.code).toBe(2);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expect(run.stderr).toMatch(/^APP_DATABASE_URL: set it to your database/);
  });
});
