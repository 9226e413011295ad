import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createConsumer } from '../../src/consumer/index.js';
import { CONTACT_EVENT_TYPES, EMAIL_EVENT_TYPES } from '../../src/event-types.js';
import { createLogger } from '../../src/logger.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import {
  CLI,
  freePort,
  killChildren,
  runCli,
  runNode,
  SYNC_WORKER,
  spawnNode,
  waitFor,
} from '../support/processes.js';
import { between, seeded } from '../support/random.js';
import { TEST_API_KEY } from '../support/simulator.js';
import { waitForWorkersGone } from '../sync/harness.js';
import { pgJobIds } from './support/fate.js';
import { fateOfFeed, simulators } from './support/fed-by-simulator.js';
import { startPrivatePostgres } from './support/private-postgres.js';
import { measured } from './support/results.js';
import { type Sandbox, useSandboxes } from './support/sandbox.js';
import { readWholeFeed, routed } from './support/served.js';

// The fault model with the queues in Postgres (QUEUE_BACKEND=postgres, BullMQ's own
// backend): commit, then publish, then mark; a crash between re-adds the same job ids,
// and BullMQ's job table keeps one row per id.

const CONSUMER_CHILD = fileURLToPath(new URL('./children/consumer-child.mjs', import.meta.url));
const sandbox = useSandboxes();
const sims = simulators();
const pool = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 12 });
const appSchemas: string[] = [];
afterAll(async () => {
  await killChildren();
  await sims.closeAll();
  for (const schema of appSchemas) await dropSchema(schema);
  await pool.end();
});

/** A sandbox whose queues are in the shared Postgres, in a schema of its own. */
const pgBox = (label: string): Promise<Sandbox> => sandbox(label, { queueUrl: TEST_DATABASE_URL });

async function unpublished(box: Sandbox): Promise<number> {
  const { rows } = await box.store.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${box.schema}".outbox WHERE published_at IS NULL`,
  );
  return rows[0]!.n;
}

describe('the queues in Postgres', () => {
  it('37. worker killed between commit and publish, queues in Postgres', async () => {
    const KILLS = 12;
    const SEED = 0x5eed37;
    await measured(
      {
        item: 37,
        title: 'worker killed between commit and publish (queues in Postgres)',
        claim:
          "With QUEUE_BACKEND=postgres, a worker killed with SIGKILL after a page's commit and before (or during) " +
          'its hand-over to the queues loses no event and adds no job twice: the next run publishes the outbox ' +
          "rows left, with the same job ids, and BullMQ's job table keeps one row per id.",
        method:
          'A simulator with 20,000 events; `sync --once` in a child (test/children/sync-worker.mjs, the built code, ' +
          `publisher chosen by publisherFor) killed ${KILLS} times in a row, each at a point drawn from a seeded ` +
          `generator (seed 0x${SEED.toString(16)}): right after the k-th commit, right before or right after the ` +
          "k-th addBulk, k in 1-4; each run goes on from the last one's cursor and outbox. A last run finishes.",
      },
      async (rec) => {
        rec.injectedWhat = 'SIGKILLs';
        const sim = await sims.start(20_000);
        const box = await pgBox('pg_kill');
        const random = seeded(SEED);
        const points = ['after-commit', 'before-add', 'after-add'];
        for (let i = 0; i < KILLS; i++) {
          const point = `${points[between(random, 0, 2)]}:${between(random, 1, 4)}`;
          const run = await runNode([SYNC_WORKER], { ...box.env(sim.baseUrl), CRASH_AT: point }, 120_000);
          if (run.signal === 'SIGKILL') {
            rec.injected++;
            // The killed run's lease ends, as SOURCE_LEASE_MS passing would, once its last statement is done.
            await waitForWorkersGone(box.store);
          } else expect(run.code, run.stderr).toBe(0);
        }
        const last = await runCli(['sync', '--once'], box.env(sim.baseUrl), 120_000);
        expect(last.code, last.stderr).toBe(0);
        const fate = await fateOfFeed(box, sim);
        rec.checked = fate.served;
        rec.lost = fate.lost;
        rec.duplicated = fate.duplicated;
        rec.figures.push(
          ['jobs in the job table', fate.jobs],
          ['outbox rows left unpublished', fate.unpublished],
        );
        expect(rec.injected).toBeGreaterThanOrEqual(4);
        expect(fate).toMatchObject({ lost: 0, duplicated: 0, strangers: 0, unpublished: 0 });
      },
    );
  });

  it("38. QUEUE_DATABASE_URL unreachable while the events' database answers", async () => {
    await measured(
      {
        item: 38,
        title: "the queues' Postgres unreachable, the events' answering",
        claim:
          'With QUEUE_DATABASE_URL unreachable and DATABASE_URL answering, `sync --once` stores every event, keeps ' +
          "their jobs in the outbox and exits 1 naming the queues' Postgres; once it answers, the next run drains " +
          'the outbox: no event lost, no job twice, as with Redis down.',
        method:
          'A simulator with 5,000 events; `sync --once` with QUEUE_DATABASE_URL at a loopback port where nothing ' +
          'listens, then `sync --once` with QUEUE_DATABASE_URL at the shared Postgres (the schema migrated before).',
      },
      async (rec) => {
        rec.injectedWhat = 'unreachable queue databases';
        const sim = await sims.start(5_000);
        const box = await pgBox('pg_queues_down');
        const closed = `postgres://postgres@127.0.0.1:${await freePort()}/test`;
        rec.injected++;
        const down = await runCli(
          ['sync', '--once'],
          box.env(sim.baseUrl, { QUEUE_DATABASE_URL: closed }),
          120_000,
        );
        const storedWhileDown = await box.store.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM "${box.schema}".events`,
        );
        const backlog = await unpublished(box);
        rec.figures.push(
          ['exit code while down', String(down.code)],
          ['events stored while down', storedWhileDown.rows[0]!.n],
          ['outbox rows waiting', backlog],
        );
        expect(down.code, down.stderr).toBe(1);
        expect(down.stderr).toContain('QUEUE_DATABASE_URL');
        expect(storedWhileDown.rows[0]!.n).toBe(5_000);
        expect(backlog).toBe(5_000);
        expect((await pgJobIds(TEST_DATABASE_URL, box.prefix)).length).toBe(0);
        const up = await runCli(['sync', '--once'], box.env(sim.baseUrl), 120_000);
        expect(up.code, up.stderr).toBe(0);
        const fate = await fateOfFeed(box, sim);
        rec.checked = fate.served;
        rec.lost = fate.lost;
        rec.duplicated = fate.duplicated;
        expect(fate).toMatchObject({ lost: 0, duplicated: 0, unpublished: 0 });
      },
    );
  });

  it("39. the queues' LISTEN connections terminated: the consumer's workers still wake", async () => {
    const ROUNDS = 3;
    await measured(
      {
        item: 39,
        title: "the queues' LISTEN connections terminated",
        claim:
          'With the queues in Postgres, a consumer whose LISTEN connections are ended by the server ' +
          '(pg_terminate_backend) still wakes for new jobs: every event of the batches added afterwards is ' +
          'applied once.',
        method:
          `A consumer (createConsumer, concurrency 8) on Postgres queues, idle; ${ROUNDS} rounds of: ` +
          "pg_terminate_backend on every LISTEN connection of BullMQ's workers (named after " +
          'their queue, found in pg_stat_activity), then 50 more events in the feed and `sync --once` adding their jobs. Each handler INSERTs into a table without a unique key.',
      },
      async (rec) => {
        rec.injectedWhat = 'LISTEN connections terminated';
        const sim = await sims.start(200);
        const box = await pgBox('pg_listen');
        const app = uniqueSchema('app_pg_listen');
        appSchemas.push(app);
        await pool.query(`CREATE SCHEMA "${app}"`);
        await pool.query(`CREATE TABLE "${app}".effects (event_id text)`);
        const handler = async (event: { id: string }, db: pg.PoolClient) => {
          await db.query(`INSERT INTO "${app}".effects VALUES ($1)`, [event.id]);
        };
        const consumer = createConsumer({
          name: 'listen',
          pool,
          schema: app,
          concurrency: 8,
          env: box.env(null),
          logger: createLogger({ level: 'silent' }),
          handlers: Object.fromEntries(
            [...EMAIL_EVENT_TYPES, ...CONTACT_EVENT_TYPES].map((t) => [t, handler]),
          ),
        });
        await consumer.migrate();
        const running = consumer.run();
        const effects = async () =>
          (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${app}".effects`)).rows[0]!.n;
        try {
          let wanted = 0;
          for (let round = 0; round <= ROUNDS; round++) {
            if (round > 0) {
              const listeners = await waitFor(
                async () => {
                  const { rows } = await pool.query<{ pid: number }>(
                    `SELECT pid FROM pg_stat_activity
                      WHERE (application_name LIKE 'email-events%' OR application_name LIKE 'contact-events%')
                        AND pid <> pg_backend_pid() AND datname = current_database()`,
                  );
                  return rows.length > 0 && rows;
                },
                { timeoutMs: 20_000, what: "the workers' LISTEN connections" },
              );
              for (const { pid } of listeners) {
                await pool.query('SELECT pg_terminate_backend($1)', [pid]);
                rec.injected++;
              }
              for (let i = 0; i < 50; i++) {
                sim.emitContactEvent('contact.subscribed', `reader.${round}.${i}@example.com`);
              }
            }
            const run = await runCli(['sync', '--once'], box.env(sim.baseUrl), 120_000);
            expect(run.code, run.stderr).toBe(0);
            wanted = routed(await readWholeFeed(sim.baseUrl, TEST_API_KEY)).length;
            await waitFor(async () => (await effects()) >= wanted, {
              timeoutMs: 60_000,
              what: `round ${round}: ${wanted} effects`,
            });
          }
          const { rows } = await pool.query<{ n: number; distinct: number }>(
            `SELECT count(*)::int AS n, count(DISTINCT event_id)::int AS distinct FROM "${app}".effects`,
          );
          rec.checked = wanted;
          rec.lost = wanted - rows[0]!.distinct;
          rec.duplicated = rows[0]!.n - rows[0]!.distinct;
          expect(rec.injected).toBeGreaterThanOrEqual(ROUNDS);
          expect([rec.lost, rec.duplicated]).toEqual([0, 0]);
        } finally {
          await consumer.close();
          await running;
        }
      },
    );
  });

  it('40. consumer killed mid-job, queues in Postgres', async () => {
    const KILLS = 8;
    const SEED = 0xc0ffee40;
    await measured(
      {
        item: 40,
        title: 'consumer killed mid-job (queues in Postgres)',
        claim:
          'With the queues in Postgres, a consumer process killed with SIGKILL right after the commit of a ' +
          "job's transaction, before the job completes, applies every event exactly once: the job comes " +
          'again once its lock runs out, finds its inbox row and completes without its handler.',
        method:
          'A real `sync --once` from the simulator (1,500 events) fills the Postgres queues; consumer processes ' +
          '(test/faults/children/consumer-child.mjs, the built dist/consumer, QUEUE_BACKEND=postgres) are started ' +
          `one after another, each killing itself with SIGKILL right after the COMMIT of its k-th applied job ` +
          `(k drawn from 1-40, seed 0x${SEED.toString(16)}), ${KILLS} times; a last run consumes the rest. ` +
          'Each handler INSERTs its effect into a table without a unique key.',
      },
      async (rec) => {
        rec.injectedWhat = 'SIGKILLs';
        const sim = await sims.start(1_500);
        const box = await pgBox('pg_consumer_kill');
        const filled = await runCli(['sync', '--once'], box.env(sim.baseUrl), 120_000);
        expect(filled.code, filled.stderr).toBe(0);
        const app = uniqueSchema('app_pg_consumer_kill');
        appSchemas.push(app);
        await pool.query(`CREATE SCHEMA "${app}"`);
        await pool.query(
          `CREATE TABLE "${app}".effects (consumer text, source text, event_id text, pid int, at timestamptz DEFAULT now())`,
        );
        const events = routed(await readWholeFeed(sim.baseUrl, TEST_API_KEY)).map((e) => e.id);
        const env = (extra: Record<string, string> = {}) => ({
          ...box.env(null),
          APP_DATABASE_URL: TEST_DATABASE_URL,
          APP_SCHEMA: app,
          CONSUMER_NAME: 'faults',
          ...extra,
        });
        const completed = async () => {
          const { rows } = await pool.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM "${box.prefix}".job WHERE state = 'completed'`,
          );
          return rows[0]!.n;
        };
        const random = seeded(SEED);
        for (let i = 0; i < KILLS; i++) {
          const child = spawnNode(
            [CONSUMER_CHILD],
            env({ KILL_AFTER_COMMIT: String(between(random, 1, 40)) }),
          );
          const exit = await child.waitExit(60_000);
          expect(exit.signal, exit.stderr).toBe('SIGKILL');
          rec.injected++;
        }
        const last = spawnNode([CONSUMER_CHILD], env());
        await waitFor(async () => (await completed()) === events.length, {
          timeoutMs: 120_000,
          what: 'every job completed',
        });
        last.signal('SIGTERM');
        expect((await last.waitExit(30_000)).code).toBe(0);
        const { rows } = await pool.query<{ n: number; distinct: number }>(
          `SELECT count(*)::int AS n, count(DISTINCT event_id)::int AS distinct FROM "${app}".effects`,
        );
        rec.checked = events.length;
        rec.lost = events.length - rows[0]!.distinct;
        rec.duplicated = rows[0]!.n - rows[0]!.distinct;
        rec.figures.push(['effects written', rows[0]!.n], ['jobs completed', await completed()]);
        expect([rec.lost, rec.duplicated]).toEqual([0, 0]);
      },
    );
  });

  it('41. Postgres crashed and restarted mid-run, events and queues in it', async () => {
    await measured(
      {
        item: 41,
        title: 'Postgres restarted mid-run (queues in Postgres)',
        claim:
          'With the events and the queues in one Postgres, a crash of the server in the middle of a catch-up ' +
          'fails the run (exit 1) with a consistent store; once the server is back, the next run goes on from ' +
          'the cursor and hands the outbox over: no event lost, no job twice.',
        method:
          'A private Postgres cluster (test/faults/support/private-postgres.ts) holding both schemas; `sync --once` ' +
          'over 20,000 events at 20 ms a page, the cluster crashed (`pg_ctl stop -m immediate`) once 3,000 are ' +
          'stored, then started; the run repeated once the crashed run’s lease (SOURCE_LEASE_MS=1000) ran out.',
      },
      async (rec) => {
        rec.injectedWhat = 'Postgres crashes';
        const postgres = await startPrivatePostgres();
        try {
          const sim = await sims.start(20_000, 20);
          const box = await sandbox('pg_queues_crash', { databaseUrl: postgres.url, queueUrl: postgres.url });
          const env = box.env(sim.baseUrl, { SOURCE_LEASE_MS: '1000' });
          const stored = async () =>
            (
              await box.store.pool.query<{ n: number }>(
                `SELECT count(*)::int AS n FROM "${box.schema}".events`,
              )
            ).rows[0]!.n;
          const child = spawnNode([CLI, 'sync', '--once'], env);
          await waitFor(async () => (await stored()) >= 3_000, {
            timeoutMs: 60_000,
            what: '3000 events stored',
          });
          await postgres.stop('immediate');
          rec.injected++;
          const crashed = await child.waitExit(60_000);
          await postgres.start();
          const atCrash = await waitFor(() => stored().catch(() => null), {
            timeoutMs: 30_000,
            what: 'Postgres back after the crash',
          });
          rec.figures.push(
            ['exit code of the crashed run', String(crashed.code)],
            ['events stored at the crash', atCrash],
          );
          expect(crashed.code).toBe(1);
          await waitFor(
            async () =>
              (
                await box.store.pool.query(
                  `SELECT FROM "${box.schema}".leases WHERE holder IS NOT NULL AND expires_at > now()`,
                )
              ).rows.length === 0,
            { timeoutMs: 10_000, what: "the crashed run's lease to run out" },
          );
          const resumed = await runCli(['sync', '--once'], env, 120_000);
          expect(resumed.code, resumed.stderr).toBe(0);
          const fate = await fateOfFeed(box, sim);
          rec.checked = fate.served;
          rec.lost = fate.lost;
          rec.duplicated = fate.duplicated;
          rec.figures.push(['jobs in the job table', fate.jobs]);
          expect(fate).toMatchObject({ lost: 0, duplicated: 0, strangers: 0, unpublished: 0 });
          await box.store.close();
        } finally {
          await postgres.dispose();
        }
      },
    );
  });
});
