import { readFileSync, rmSync } from 'node:fs';
import { Queue } from 'bullmq';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { createRedisPublisher } from '../../src/queue/redis-publisher.js';
import { requeue } from '../../src/queue/requeue.js';
import { jobOptionsFor } from '../../src/queue/routes.js';
import { createSync, type Sync } from '../../src/sync/sync.js';
import { testConfig } from '../support/config.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import { freePort, runCli, runNode, spawnNode, waitFor } from '../support/processes.js';
import { deletePrefix, TEST_REDIS_URL, uniquePrefix } from '../support/redis.js';
import { useSimulator } from '../support/simulator.js';

const EXAMPLE = new URL('../../examples/consumer/', import.meta.url).pathname;
const schema = uniqueSchema('consumer_feed');
const appSchema = uniqueSchema('consumer_app');
/** The example's schema in the run against a Redis that is down: made before Redis is tried. */
const downSchema = uniqueSchema('consumer_down');
const demoSchema = uniqueSchema('consumer_demo');
const demoPrefix = uniquePrefix('consumer-demo');
const demoAppSchema = uniqueSchema('consumer_demo_app');
const prefix = uniquePrefix('consumer');
const epipePrefix = uniquePrefix('consumer-epipe');
const epipeSchema = uniqueSchema('consumer_epipe');
// Two cycles of the backlog: 20 emails, two bounced and two complained.
const sim = useSimulator({ backlog: 42 });
const db = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 2 });
let sync: Sync;
let jobs: number;

beforeAll(async () => {
  sim().emitContactEvent('contact.subscribed', 'Reader@Example.com');
  const config = testConfig({ schema, prefix, baseUrl: sim().baseUrl });
  sync = createSync(config, { logger: createLogger({ level: 'silent' }), autoMigrate: true });
  const result = await sync.runOnce();
  expect(result).toMatchObject({ status: 'caught-up', stored: 43, drained: true });
  jobs = result.stored;
});
afterAll(async () => {
  await sync.close();
  await db.end();
  await dropSchema(schema);
  await dropSchema(appSchema);
  await dropSchema(downSchema);
  await dropSchema(demoSchema);
  await dropSchema(demoAppSchema);
  await deletePrefix(demoPrefix);
  await deletePrefix(prefix);
  await deletePrefix(epipePrefix);
  await dropSchema(epipeSchema);
  rmSync(`${EXAMPLE}dist`, { recursive: true, force: true });
});

const count = async (sql: string): Promise<number> =>
  Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM ${sql}`)).rows[0]!.n);

describe('examples/consumer', () => {
  it("compiles under the project's tsconfig against feedsync/consumer and runs unchanged against a real sync's jobs, once per event", async () => {
    const tsc = await runNode(
      ['node_modules/typescript/bin/tsc', '-p', EXAMPLE],
      { PATH: process.env.PATH ?? '' },
      90_000,
    );
    expect(tsc.code, tsc.stdout + tsc.stderr).toBe(0);

    // Only what the README says to set; the queue names are feedsync's defaults.
    const consumer = spawnNode([`${EXAMPLE}dist/consumer.js`], {
      REDIS_URL: TEST_REDIS_URL,
      QUEUE_PREFIX: prefix,
      APP_DATABASE_URL: TEST_DATABASE_URL,
      APP_SCHEMA: appSchema,
    });
    try {
      // The inbox of feedsync/consumer: one row per event handled.
      const processed = () => count(`"${appSchema}".feedsync_inbox`).catch(() => 0);
      await waitFor(async () => (await processed()) === jobs, {
        timeoutMs: 45_000,
        what: 'every job consumed',
      });
      expect(await count(`"${appSchema}".messages`)).toBe(20);
      const bouncedOrComplained = await db.query<{ address: string }>(
        `SELECT DISTINCT lower(a) AS address FROM "${schema}".events, jsonb_array_elements_text(data->'to') AS a
          WHERE type IN ('email.bounced', 'email.complained') ORDER BY 1`,
      );
      expect(bouncedOrComplained.rows).toHaveLength(4);
      const suppressed = await db.query<{ address: string }>(
        `SELECT address FROM "${appSchema}".suppressed_addresses ORDER BY 1`,
      );
      expect(suppressed.rows).toEqual(bouncedOrComplained.rows);
      const subscribed = await db.query(`SELECT address, subscribed FROM "${appSchema}".subscriptions`);
      expect(subscribed.rows).toEqual([{ address: 'reader@example.com', subscribed: true }]);

      // Every job again (Redis lost them, say): each runs a second time and changes nothing.
      const queues = ['email-events', 'contact-events'].map(
        (name) => new Queue(name, { connection: { url: TEST_REDIS_URL }, prefix }),
      );
      try {
        for (const q of queues) await q.clean(0, 1_000, 'completed');
        const publisher = createRedisPublisher({
          redis: testConfig({ schema, prefix }).redis,
          prefix,
          jobOptions: jobOptionsFor(testConfig({ schema, prefix }).queues),
        });
        try {
          const again = await requeue(sync.store, publisher, {
            source: 'default',
            since: { time: new Date(Date.now() - 3_600_000) },
            retentionHours: 168,
          });
          expect(again).toMatchObject({ requeued: jobs, added: jobs });
        } finally {
          await publisher.close();
        }
        await waitFor(
          async () => {
            const done = await Promise.all(queues.map((q) => q.getCompletedCount()));
            return done[0]! + done[1]! === jobs;
          },
          { timeoutMs: 45_000, what: 'every requeued job completed' },
        );
      } finally {
        await Promise.all(queues.map((q) => q.close()));
      }
      expect(await processed()).toBe(jobs);
      expect(await count(`"${appSchema}".suppressed_addresses`)).toBe(4);
      expect(await count(`"${appSchema}".messages`)).toBe(20);

      // Another account (source) with the same email id, and a retried email.sent of the
      // same instant as its email.delivered, arriving after it.
      const queue = new Queue('email-events', { connection: { url: TEST_REDIS_URL }, prefix });
      const at = '2026-01-01T00:00:00.000000Z';
      const job = (id: string, type: string, emailId: string) =>
        queue.add(
          type,
          { source: 'other', id, type, created_at: at, data: { email_id: emailId } },
          {
            jobId: `other/${id}`,
          },
        );
      try {
        await job('evt_000000000001', 'email.sent', 'em_bl_000000001');
        await job('evt_000000000003', 'email.delivered', 'em_tie');
        await waitFor(async () => (await processed()) === jobs + 2, { timeoutMs: 45_000, what: 'two jobs' });
        await job('evt_000000000002', 'email.sent', 'em_tie');
        await waitFor(async () => (await processed()) === jobs + 3, { timeoutMs: 45_000, what: 'the retry' });
      } finally {
        await queue.close();
      }
      const messages = await db.query(
        `SELECT source, email_id, last_event FROM "${appSchema}".messages
          WHERE email_id IN ('em_bl_000000001', 'em_tie') ORDER BY source, email_id`,
      );
      expect(messages.rows).toEqual([
        { source: 'default', email_id: 'em_bl_000000001', last_event: 'email.delivered' },
        { source: 'other', email_id: 'em_bl_000000001', last_event: 'email.sent' },
        { source: 'other', email_id: 'em_tie', last_event: 'email.delivered' },
      ]);
    } finally {
      consumer.signal('SIGTERM');
      const exit = await consumer.waitExit(20_000);
      expect(exit.code, exit.stderr).toBe(0);
    }
    const lines = consumer.stdout().trim().split('\n');
    expect(lines[0]).toMatch(
      new RegExp(`^consuming feedsync's queues into 127\\.0\\.0\\.1:5432/\\w+, schema ${appSchema}$`),
    );
    // A line per event recorded (each once, though every job ran twice, then the three
    // above), and never an address.
    const perJob = lines.filter((line) => /^\S+\/evt_\w+ [a-z.]+( em_\w+)?: recorded$/.test(line));
    expect(perJob).toHaveLength(jobs + 3);
    expect(consumer.stdout()).not.toContain('@');
  }, 180_000);

  it('stops as on SIGTERM when its reader goes away (`| head -2`): exit 0, no job left active', async () => {
    const JOBS = 400;
    const queue = new Queue('email-events', { connection: { url: TEST_REDIS_URL }, prefix: epipePrefix });
    try {
      await queue.addBulk(
        Array.from({ length: JOBS }, (_, i) => {
          const id = `evt_${String(i).padStart(12, '0')}`;
          const data = {
            source: 'pipe',
            id,
            type: 'email.sent',
            created_at: '2026-01-01T00:00:00.000Z',
            data: { email_id: `em_${i}`, to: [] },
          };
          return { name: 'email.sent', data, opts: { jobId: `pipe/${id}` } };
        }),
      );
      const consumer = spawnNode([`${EXAMPLE}dist/consumer.js`], {
        REDIS_URL: TEST_REDIS_URL,
        QUEUE_PREFIX: epipePrefix,
        APP_DATABASE_URL: TEST_DATABASE_URL,
        APP_SCHEMA: epipeSchema,
      });
      // As `head -2` does: two lines read, then the pipe's reading end closed.
      await waitFor(() => consumer.stdout().split('\n').length > 2, { timeoutMs: 30_000, what: 'two lines' });
      consumer.process.stdout?.destroy();
      const exit = await consumer.waitExit(30_000);
      expect(exit.code, exit.stderr).toBe(0);
      expect(exit.stderr).not.toContain('EPIPE');
      const counts = await queue.getJobCounts('active', 'completed', 'waiting');
      expect(counts.active).toBe(0);
      expect((counts.completed ?? 0) + (counts.waiting ?? 0)).toBe(JOBS);
      // Every job completed was recorded, once; the rest wait for the next run.
      expect(await count(`"${epipeSchema}".feedsync_inbox`)).toBe(counts.completed);
    } finally {
      await queue.close();
    }
  }, 90_000);

  it('refuses a schema that holds tables it did not make, and writes nothing there', async () => {
    const before = await count(`pg_tables WHERE schemaname = '${schema}'`);
    const run = await runNode(
      [`${EXAMPLE}dist/consumer.js`],
      {
        REDIS_URL: TEST_REDIS_URL,
        QUEUE_PREFIX: prefix,
        APP_DATABASE_URL: TEST_DATABASE_URL,
        APP_SCHEMA: schema,
      },
      60_000,
    );
    expect(run.code).toBe(2);
    expect(run.stderr.trim().split('\n')).toEqual([
      `APP_SCHEMA: schema ${schema} already holds tables that this example did not make; name a new or an empty one`,
    ]);
    expect(await count(`pg_tables WHERE schemaname = '${schema}'`)).toBe(before);
  }, 90_000);

  it('with Redis down, exits 1 with one line naming REDIS_URL and the address, no stack trace', async () => {
    const port = await freePort();
    const run = await runNode(
      [`${EXAMPLE}dist/consumer.js`],
      {
        REDIS_URL: `redis://127.0.0.1:${port}`,
        QUEUE_PREFIX: prefix,
        APP_DATABASE_URL: TEST_DATABASE_URL,
        APP_SCHEMA: downSchema,
      },
      60_000,
    );
    expect(run.code).toBe(1);
    expect(run.stderr.trim().split('\n')).toEqual([
      `consumer: REDIS_URL: cannot reach Redis at 127.0.0.1:${port} (ECONNREFUSED)`,
    ]);
  }, 90_000);

  it("after `npm run demo -- --leave-jobs`, prints its README's sample output", async () => {
    const demo = await runCli(['demo', '--leave-jobs'], {
      PATH: process.env.PATH ?? '',
      DATABASE_URL: TEST_DATABASE_URL,
      REDIS_URL: TEST_REDIS_URL,
      DATABASE_SCHEMA: demoSchema,
      QUEUE_PREFIX: demoPrefix,
    });
    expect(demo.code, demo.stderr).toBe(0);
    expect(demo.stdout).toContain(
      `6. the jobs are left in the queues for a consumer of your own: QUEUE_PREFIX=${demoPrefix}`,
    );
    const sample = /## What it prints[\s\S]*?```\n([\s\S]*?)```/
      .exec(readFileSync(`${EXAMPLE}README.md`, 'utf8'))![1]!
      .trim()
      .split('\n');
    const consumer = spawnNode([`${EXAMPLE}dist/consumer.js`], {
      REDIS_URL: TEST_REDIS_URL,
      QUEUE_PREFIX: demoPrefix,
      APP_DATABASE_URL: TEST_DATABASE_URL,
      APP_SCHEMA: demoAppSchema,
    });
    const printed = () =>
      consumer
        .stdout()
        .trim()
        .split('\n')
        .filter((line) => !line.startsWith('{'));
    try {
      await waitFor(() => printed().length === sample.length, {
        timeoutMs: 45_000,
        what: 'every job recorded',
      });
    } finally {
      consumer.signal('SIGTERM');
      const exit = await consumer.waitExit(20_000);
      expect(exit.code, exit.stderr).toBe(0);
    }
    const [start, ...events] = printed();
    // The README's defaults in its first line; this run's own database and schema here.
    const db = new URL(TEST_DATABASE_URL);
    expect(start).toBe(
      sample[0]!
        .replace('127.0.0.1:5432/postgres', `${db.hostname}:${db.port || '5432'}${db.pathname}`)
        .replace('feedsync_example_consumer', demoAppSchema),
    );
    expect([...events].sort()).toEqual(sample.slice(1).sort());
  }, 120_000);
});
