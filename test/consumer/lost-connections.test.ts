import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobIdFor, jobOptionsFor } from '../../src/queue/routes.js';
import { dropSchema, TEST_DATABASE_URL, testDatabaseUrlWith, uniqueSchema } from '../support/postgres.js';
import { killChildren, spawnNode, waitFor } from '../support/processes.js';
import { dropQueues, queuePrefix, TEST_QUEUE_ENV, testQueue } from '../support/queues.js';
import { TEST_REDIS_URL } from '../support/redis.js';

// A consumer whose application pool has no 'error' listener (as the docs' snippets had
// none) loses idle connections to Postgres (pg_terminate_backend, as a restart or
// idle_session_timeout does): the process goes on, and every event has one effect.

const CHILD = fileURLToPath(new URL('../faults/children/consumer-child.mjs', import.meta.url));
const app = uniqueSchema('consumer_lost');
const prefix = await queuePrefix('consumer-lost');
/** Names the child's application pool in pg_stat_activity, so only its idle clients are ended. */
const appName = `lost-${app}`;
const pool = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 2 });
const queue = testQueue('email-events', prefix);
const options = jobOptionsFor({ jobAttempts: 10, jobBackoffMs: 10 });

beforeAll(async () => {
  await pool.query(`CREATE SCHEMA "${app}"`);
  await pool.query(
    `CREATE TABLE "${app}".effects (consumer text, source text, event_id text, pid int, at timestamptz DEFAULT now())`,
  );
});
afterAll(async () => {
  await killChildren();
  await queue.close();
  await pool.end();
  await dropSchema(app);
  await dropQueues(prefix);
});

async function addEvents(from: number, count: number): Promise<void> {
  for (let i = from; i < from + count; i++) {
    const id = `evt_${String(i).padStart(6, '0')}`;
    const event = {
      source: 'default',
      id,
      type: 'email.sent',
      created_at: '2026-01-01T00:00:00.000Z',
      data: { email_id: `em_${id}`, to: [] },
    };
    await queue.add(event.type, event, { ...options, jobId: jobIdFor(event.source, event.id) });
  }
}

const effects = async (): Promise<{ events: number; rows: number }> =>
  (
    await pool.query<{ events: number; rows: number }>(
      `SELECT count(DISTINCT event_id)::int AS events, count(*)::int AS rows FROM "${app}".effects`,
    )
  ).rows[0]!;

/** Ends every idle connection of the child's application pool; how many. */
async function terminateIdle(): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
      WHERE application_name = $1 AND state = 'idle'`,
    [appName],
  );
  return rows[0]!.n;
}

describe("the application's pool losing connections", () => {
  it('pg_terminate_backend on idle clients mid-run: the consumer process lives on, each event applied once', async () => {
    const child = spawnNode([CHILD], {
      APP_DATABASE_URL: testDatabaseUrlWith({ search: `application_name=${appName}` }),
      APP_SCHEMA: app,
      CONSUMER_NAME: 'lost',
      CONCURRENCY: '4',
      REDIS_URL: TEST_REDIS_URL,
      QUEUE_PREFIX: prefix,
      ...TEST_QUEUE_ENV,
      LOG_LEVEL: 'warn',
    });
    const FIRST = 200;
    const TOTAL = 600;
    await addEvents(0, FIRST);
    await waitFor(async () => (await effects()).events === FIRST, {
      timeoutMs: 60_000,
      what: 'the first jobs',
    });
    // Idle now: every client of the pool is idle, and each is ended under it.
    let ended = await waitFor(async () => (await terminateIdle()) || false, {
      timeoutMs: 10_000,
      what: 'an idle client to end',
    });
    await addEvents(FIRST, TOTAL - FIRST);
    // While the jobs run, whatever client is idle at that instant is ended too.
    await waitFor(
      async () => {
        if (child.process.exitCode !== null) throw new Error(`the consumer exited: ${child.stderr()}`);
        ended += await terminateIdle();
        return (await effects()).events === TOTAL;
      },
      { timeoutMs: 90_000, intervalMs: 50, what: 'every job applied' },
    );
    ended += await terminateIdle();
    expect(ended).toBeGreaterThan(0);
    expect(child.process.exitCode, child.stderr()).toBeNull();
    expect(await effects()).toEqual({ events: TOTAL, rows: TOTAL });
    // The lost clients were logged as such, and the process still stops cleanly.
    await waitFor(() => child.stdout().includes('an idle connection of the pool was lost'), {
      what: 'the lost connection logged',
    });
    child.signal('SIGTERM');
    const exit = await child.waitExit(30_000);
    expect(exit.code, exit.stderr).toBe(0);
  }, 180_000);
});
