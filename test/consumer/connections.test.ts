import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createPostgresBackend, Queue } from 'bullmq';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consumerQueueConnections } from '../../src/compose/queue-store.js';
import { connectionsVerdict } from '../../src/doctor/pg-queue-checks.js';
import { migrateQueues, pgQueueConnection } from '../../src/queue/pg-queues.js';
import { dropSchema, TEST_DATABASE_URL, testDatabaseUrlWith, uniqueSchema } from '../support/postgres.js';
import { killChildren, spawnNode, waitFor } from '../support/processes.js';

// What a consumer replica on Postgres queues opens, counted: its connections to the
// server (found by its process's sockets, so other tests' consumers on the shared server
// do not count), by application_name, while both queues hold jobs; and doctor's warning
// when one more replica would not fit under max_connections.

const CHILD = fileURLToPath(new URL('../faults/children/consumer-child.mjs', import.meta.url));
const CONCURRENCY = 4;
const JOBS = 60;
const app = uniqueSchema('consumer_conns');
const queues = uniqueSchema('consumer_conns_q');
const appName = `conns-${app}`;
const pool = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 2 });
const port = Number(new URL(TEST_DATABASE_URL).port || 5432);

beforeAll(async () => {
  await migrateQueues({ url: TEST_DATABASE_URL, schema: queues }, 10_000);
  await pool.query(`CREATE SCHEMA "${app}"`);
  await pool.query(
    `CREATE TABLE "${app}".effects (consumer text, source text, event_id text, pid int, at timestamptz DEFAULT now())`,
  );
});
afterAll(async () => {
  await killChildren();
  await pool.end();
  await dropSchema(app);
  await dropSchema(queues);
});

/** The local ports of `pid`'s TCP connections to the Postgres port. */
function portsOf(pid: number): number[] {
  const out = execFileSync('ss', ['-tnpH', 'state', 'established', `( dport = :${port} )`]).toString();
  return out
    .split('\n')
    .filter((line) => line.includes(`pid=${pid},`))
    .map((line) => Number(/\S+:(\d+)\s+\S+:\d+\s/.exec(line)?.[1]))
    .filter((n) => n > 0);
}

describe("a consumer replica's connections on Postgres queues", () => {
  it(`opens at most 2 × (concurrency + 2) + 2 to the queues (${consumerQueueConnections(CONCURRENCY)} at ${CONCURRENCY}), two of them LISTEN`, async () => {
    const connection = pgQueueConnection(
      { url: TEST_DATABASE_URL, schema: queues },
      { max: 2, connectTimeoutMs: 10_000, applicationName: 'feedsync-test' },
    );
    for (const name of ['email-events', 'contact-events']) {
      const queue = new Queue(name, { connection }, createPostgresBackend) as unknown as Queue;
      try {
        await queue.addBulk(
          Array.from({ length: JOBS }, (_, i) => {
            const type = name === 'email-events' ? 'email.sent' : 'contact.subscribed';
            const id = `${name}-${i}`;
            const data = {
              source: 'default',
              id,
              type,
              created_at: '2026-01-01T00:00:00.000Z',
              data: { email_id: id, to: [] },
            };
            return { name: type, data, opts: { jobId: `default/${id}` } };
          }),
        );
      } finally {
        await queue.close();
      }
    }
    const child = spawnNode([CHILD], {
      APP_DATABASE_URL: testDatabaseUrlWith({ search: `application_name=${appName}` }),
      APP_SCHEMA: app,
      CONSUMER_NAME: 'conns',
      CONCURRENCY: String(CONCURRENCY),
      QUEUE_BACKEND: 'postgres',
      QUEUE_DATABASE_URL: TEST_DATABASE_URL,
      QUEUE_PREFIX: queues,
      LOG_LEVEL: 'warn',
    });
    let most = 0;
    let listening = 0;
    const effects = async () =>
      Number((await pool.query(`SELECT count(*) AS n FROM "${app}".effects`)).rows[0].n);
    await waitFor(
      async () => {
        const ports = portsOf(child.pid);
        const { rows } = await pool.query<{ application_name: string; n: number }>(
          `SELECT application_name, count(*)::int AS n FROM pg_stat_activity
            WHERE client_port = ANY($1::int[]) AND application_name <> $2 GROUP BY 1`,
          [ports, appName],
        );
        most = Math.max(
          most,
          rows.reduce((sum, r) => sum + r.n, 0),
        );
        listening = Math.max(
          listening,
          rows.filter((r) => r.application_name.endsWith('-events')).reduce((sum, r) => sum + r.n, 0),
        );
        return (await effects()) === 2 * JOBS;
      },
      { timeoutMs: 60_000, intervalMs: 20, what: 'every job applied' },
    );
    child.signal('SIGTERM');
    expect((await child.waitExit(30_000)).code).toBe(0);
    expect(listening).toBe(2);
    expect(most).toBeGreaterThan(2);
    expect(most).toBeLessThanOrEqual(consumerQueueConnections(CONCURRENCY));
    expect(consumerQueueConnections(16)).toBe(38);
  }, 90_000);

  it('doctor warns when one more replica at the default concurrency would not fit under max_connections', () => {
    expect(connectionsVerdict({ used: 20, max: 97 })).toMatchObject({
      status: 'ok',
      message:
        '20 of 97 connections in use; a consumer replica opens up to 38 here at concurrency 16 (2 × (concurrency + 2) + 2), its own pool apart',
    });
    expect(connectionsVerdict({ used: 60, max: 97 })).toMatchObject({
      status: 'warn',
      message: expect.stringMatching(/^60 of 97 connections in use; .*: one more would not fit$/),
      fix: expect.stringContaining('max_connections'),
    });
  });
});
