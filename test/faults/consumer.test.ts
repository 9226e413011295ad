import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConsumer } from '../../src/consumer/index.js';
import { CONTACT_EVENT_TYPES, EMAIL_EVENT_TYPES } from '../../src/event-types.js';
import { createLogger } from '../../src/logger.js';
import type { Simulator } from '../../src/simulator/index.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import {
  killChildren,
  type RedisServer,
  type RunningChild,
  runCli,
  spawnNode,
  startRedisServer,
  waitFor,
} from '../support/processes.js';
import { TEST_QUEUE_BACKEND } from '../support/queues.js';
import { between, seeded } from '../support/random.js';
import { startTestSimulator, TEST_API_KEY } from '../support/simulator.js';
import { QUEUES } from './support/fate.js';
import { measured } from './support/results.js';
import { type Sandbox, useSandboxes } from './support/sandbox.js';
import { loseJobs, QUEUES_IN, queueOf } from './support/sandbox-queues.js';
import { readWholeFeed, routed } from './support/served.js';

// Exactly one effect per event at the consumer's end (DESIGN section 8), under the
// faults a consumer meets: kills (some between its commit and the job's completion),
// handlers that throw, jobs handed over again after the queues lost them, and replicas that
// run one job at once. Every handler writes its effect with a plain INSERT into a table
// without a unique key: a second effect of one event would be a second row.

const CHILD = fileURLToPath(new URL('./children/consumer-child.mjs', import.meta.url));
const BACKLOG = Number(process.env.CONSUMER_FAULT_BACKLOG ?? 1_500);
const sandbox = useSandboxes();
const pool = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 12 });
const appSchemas: string[] = [];
let sim: Simulator;
let redis: RedisServer | null = null;

beforeAll(async () => {
  sim = await startTestSimulator({ backlog: BACKLOG });
});
afterAll(async () => {
  await killChildren();
  await sim.close();
  for (const schema of appSchemas) await dropSchema(schema);
  await pool.end();
  await redis?.dispose();
});

/** One item's world: a sandbox fed by a real `sync --once` from the simulator, and the application's schema. */
interface Fed {
  box: Sandbox;
  app: string;
  /** The routed events of the feed: each must have exactly one effect. */
  events: string[];
}

async function fed(label: string, opts: { redisUrl?: string } = {}): Promise<Fed> {
  const box = await sandbox(label, opts);
  // Retries enough that a handler throwing at random is never out of attempts.
  const run = await runCli(
    ['sync', '--once'],
    box.env(sim.baseUrl, { JOB_ATTEMPTS: '40', JOB_BACKOFF_MS: '1' }),
    120_000,
  );
  expect(run.code, run.stderr).toBe(0);
  const app = uniqueSchema(`app_${label}`);
  appSchemas.push(app);
  await pool.query(`CREATE SCHEMA "${app}"`);
  // No unique key, on purpose.
  await pool.query(
    `CREATE TABLE "${app}".effects (consumer text, source text, event_id text, pid int, at timestamptz DEFAULT now())`,
  );
  const events = routed(await readWholeFeed(sim.baseUrl, TEST_API_KEY)).map((e) => e.id);
  return { box, app, events };
}

/** Events without an effect, and effects beyond one per event. */
async function effectsOf(world: Fed): Promise<{ lost: number; duplicated: number; rows: number }> {
  const { rows } = await pool.query<{ event_id: string; n: number }>(
    `SELECT event_id, count(*)::int AS n FROM "${world.app}".effects GROUP BY 1`,
  );
  const counts = new Map(rows.map((r) => [r.event_id, r.n]));
  return {
    lost: world.events.filter((id) => !counts.has(id)).length,
    duplicated: rows.reduce((sum, r) => sum + r.n - 1, 0),
    rows: rows.reduce((sum, r) => sum + r.n, 0),
  };
}

async function effectCount(world: Fed): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${world.app}".effects`);
  return rows[0]?.n ?? 0;
}

type Handler = (event: { source: string; id: string }, db: pg.PoolClient) => Promise<void>;

/**
 * One createConsumer named `name` (concurrency 8) with `handler` for every routed type,
 * run in this process until every job of `world` has completed, then closed.
 */
async function consumeAll(world: Fed, name: string, handler: Handler): Promise<void> {
  const consumer = createConsumer({
    name,
    pool,
    schema: world.app,
    concurrency: 8,
    env: world.box.queueEnv(),
    logger: createLogger({ level: 'silent' }),
    handlers: Object.fromEntries([...EMAIL_EVENT_TYPES, ...CONTACT_EVENT_TYPES].map((t) => [t, handler])),
  });
  await consumer.migrate();
  const running = consumer.run();
  try {
    await waitFor(allCompleted(world), { timeoutMs: 120_000, what: 'every job completed' });
  } finally {
    await consumer.close();
    await running;
  }
}

/** Completed and failed jobs of both queues. */
async function jobCounts(box: Sandbox): Promise<{ completed: number; failed: number }> {
  const out = { completed: 0, failed: 0 };
  for (const name of QUEUES) {
    const queue = queueOf(box, name);
    try {
      const counts = await queue.getJobCounts('completed', 'failed');
      out.completed += counts.completed ?? 0;
      out.failed += counts.failed ?? 0;
    } finally {
      await queue.close();
    }
  }
  return out;
}

const allCompleted = (world: Fed) => async () =>
  (await jobCounts(world.box)).completed === world.events.length;

function childEnv(world: Fed, extra: Record<string, string> = {}): Record<string, string> {
  return {
    APP_DATABASE_URL: TEST_DATABASE_URL,
    APP_SCHEMA: world.app,
    CONSUMER_NAME: 'faults',
    ...world.box.queueEnv(),
    LOG_LEVEL: 'debug',
    ...extra,
  };
}

/** Jobs a consumer ran that found their event in the inbox (its debug lines). */
const seenBefore = (child: RunningChild): number => child.stdout().split('"msg":"seen before"').length - 1;

/** SIGTERM, and the exit code (the consumer finishes the jobs in hand and exits 0). */
async function stop(child: RunningChild): Promise<number | null> {
  child.signal('SIGTERM');
  return (await child.waitExit(30_000)).code;
}

describe('the consumer applies each event once under faults', () => {
  it('33. consumer kill -9 loop: 20 SIGKILLs, half of them between a commit and its job completing', async () => {
    const KILLS = 20;
    const SEED = 0xc0ffee;
    await measured(
      {
        item: 33,
        title: 'consumer kill -9 loop',
        claim:
          'A consumer process (createConsumer) killed with SIGKILL at any moment, including between the commit of ' +
          "a job's transaction and the job's completion in BullMQ, applies every event exactly once: the job runs " +
          'again, finds its inbox row and completes without its handler.',
        method:
          `A real \`sync --once\` from the simulator (${BACKLOG} events) fills the queues; then consumer processes ` +
          `(test/faults/children/consumer-child.mjs, the built dist/consumer) are started one after another and ` +
          `killed ${KILLS} times: every other run kills itself with SIGKILL right after the COMMIT of its k-th ` +
          'applied job returns, before the job completes (k drawn from 1–30), the others are killed by the test ' +
          'once 1–40 more effects have landed (drawn from a seeded generator, seed 0x' +
          `${SEED.toString(16)}). Each handler INSERTs its effect into a table without a unique key. ` +
          "BullMQ hands a killed run's jobs on after their lock (1 s) runs out. A last run consumes the rest.",
      },
      async (rec) => {
        rec.injectedWhat = 'SIGKILLs';
        const world = await fed('consumer_kill');
        const random = seeded(SEED);
        let afterCommit = 0;
        let seen = 0;
        for (let i = 0; i < KILLS; i++) {
          const self = i % 2 === 0;
          const before = await effectCount(world);
          const child = spawnNode(
            [CHILD],
            childEnv(world, self ? { KILL_AFTER_COMMIT: String(between(random, 1, 30)) } : {}),
          );
          if (!self) {
            const more = between(random, 1, 40);
            await waitFor(
              async () =>
                child.process.exitCode !== null || (await effectCount(world)) >= before + more || undefined,
              { timeoutMs: 60_000, what: `${more} more effects` },
            );
            child.signal('SIGKILL');
          }
          const exit = await child.waitExit(60_000);
          seen += seenBefore(child);
          expect(exit.signal, exit.stderr).toBe('SIGKILL');
          rec.injected++;
          if (self) afterCommit++;
        }
        const last = spawnNode([CHILD], childEnv(world));
        await waitFor(allCompleted(world), { timeoutMs: 120_000, what: 'every job completed' });
        expect(await stop(last)).toBe(0);
        seen += seenBefore(last);
        const effects = await effectsOf(world);
        const jobs = await jobCounts(world.box);
        rec.checked = world.events.length;
        rec.lost = effects.lost;
        rec.duplicated = effects.duplicated;
        rec.figures = [
          ['kills right after a commit, before the job completed', afterCommit],
          ['kills by the test, mid-stream', KILLS - afterCommit],
          ['jobs run again that found their inbox row (handler not called)', seen],
          ['effects written', effects.rows],
          ['jobs completed / failed', `${jobs.completed} / ${jobs.failed}`],
        ];
        expect(effects).toMatchObject({ lost: 0, duplicated: 0 });
        // Each kill after a commit left a committed job uncompleted: it came again and was found.
        expect(seen).toBeGreaterThanOrEqual(afterCommit);
        expect(jobs).toEqual({ completed: world.events.length, failed: 0 });
      },
    );
  });

  it('34. handlers that throw at random: every throw rolls back, every retry applies once', async () => {
    const SEED = 0xbad5eed;
    const P = 0.3;
    await measured(
      {
        item: 34,
        title: 'consumer handler throws at random',
        claim:
          "A handler that throws rolls its writes back with the event's inbox row; BullMQ retries the job " +
          '(JOB_ATTEMPTS) and the event ends with exactly one effect.',
        method:
          `A real \`sync --once\` from the simulator (${BACKLOG} events, JOB_ATTEMPTS=40, JOB_BACKOFF_MS=1) fills ` +
          'the queues; one createConsumer (concurrency 8) consumes them with a handler that INSERTs its effect ' +
          `into a table without a unique key and then throws on ${P * 100}% of its calls (a seeded generator, ` +
          `seed 0x${SEED.toString(16)}), after the write, so that only the rollback keeps it out.`,
      },
      async (rec) => {
        rec.injectedWhat = 'handler throws';
        const world = await fed('consumer_throws');
        const random = seeded(SEED);
        let calls = 0;
        const handler: Handler = async (event, db) => {
          calls++;
          await db.query(
            `INSERT INTO "${world.app}".effects (consumer, source, event_id) VALUES ('t', $1, $2)`,
            [event.source, event.id],
          );
          if (random() < P) {
            rec.injected++;
            throw new Error('injected');
          }
        };
        await consumeAll(world, 'throws', handler);
        const effects = await effectsOf(world);
        const jobs = await jobCounts(world.box);
        rec.checked = world.events.length;
        rec.lost = effects.lost;
        rec.duplicated = effects.duplicated;
        rec.figures = [
          ['handler calls (first runs and retries)', calls],
          ['effects written and kept', effects.rows],
          ['jobs completed / failed', `${jobs.completed} / ${jobs.failed}`],
        ];
        expect(rec.injected).toBeGreaterThan(0);
        expect(calls).toBe(world.events.length + rec.injected);
        expect(effects).toMatchObject({ lost: 0, duplicated: 0 });
        expect(jobs).toEqual({ completed: world.events.length, failed: 0 });
      },
    );
  });

  it('35. requeue --since after the queues lost the completed jobs: every job runs again, no effect twice', async () => {
    const inPostgres = TEST_QUEUE_BACKEND === 'postgres';
    await measured(
      {
        item: 35,
        title: 'consumer after requeue --since',
        claim:
          `When ${QUEUES_IN} loses its jobs and \`feedsync requeue --since\` hands every event over again, the consumer runs ` +
          'each job again and applies none of them a second time.',
        method:
          `A real \`sync --once\` from the simulator (${BACKLOG} events) fills the queues ` +
          (inPostgres
            ? "(a schema of the item's own); a createConsumer consumes them all; the test closes it and empties " +
              "every table of the queues' schema but BullMQ's migration ledger, "
            : 'of a redis-server the test starts; a createConsumer consumes them all; the test closes it and runs ' +
              'FLUSHALL on that server (never the shared one), ') +
          'then `feedsync requeue --since 1h` (the built CLI) re-adds every published event, and ' +
          'a new consumer of the same name consumes them all again.',
      },
      async (rec) => {
        rec.injectedWhat = inPostgres ? 'emptied queues + requeue' : 'FLUSHALL + requeue';
        // On Redis, a server of the item's own: FLUSHALL is never run on the shared one.
        redis = inPostgres ? null : await startRedisServer();
        const world = await fed('consumer_requeue', redis ? { redisUrl: redis.url } : {});
        let calls = 0;
        const consume = (): Promise<void> =>
          consumeAll(world, 'requeue', async (event, db) => {
            calls++;
            await db.query(
              `INSERT INTO "${world.app}".effects (consumer, source, event_id) VALUES ('r', $1, $2)`,
              [event.source, event.id],
            );
          });
        await consume();
        if (redis) {
          const admin = redis.admin();
          try {
            await admin.flushall();
          } finally {
            admin.disconnect();
          }
        } else await loseJobs(world.box);
        rec.injected = 1;
        expect((await jobCounts(world.box)).completed).toBe(0);
        const requeue = await runCli(['requeue', '--since', '1h', '--json'], world.box.env(null), 60_000);
        expect(requeue.code, requeue.stderr).toBe(0);
        const callsBefore = calls;
        await consume();
        const effects = await effectsOf(world);
        rec.checked = world.events.length;
        rec.lost = effects.lost;
        rec.duplicated = effects.duplicated;
        rec.figures = [
          ['jobs completed after the requeue', (await jobCounts(world.box)).completed],
          ['handler calls before / after the requeue', `${callsBefore} / ${calls - callsBefore}`],
          ['effects written', effects.rows],
        ];
        expect(callsBefore).toBe(world.events.length);
        expect(calls).toBe(callsBefore);
        expect(effects).toMatchObject({ lost: 0, duplicated: 0 });
      },
    );
  });

  it('36. three replicas of one consumer at once, jobs stalling from one to another: one effect each', async () => {
    const REPLICAS = 3;
    const STALL_EVERY = 40;
    await measured(
      {
        item: 36,
        title: 'consumer replicas at once',
        claim:
          'Several replicas of one consumer (one name) over the same queues apply every event once, also when a ' +
          'job stalls on one replica and BullMQ hands it to another while the first still holds it.',
        method:
          `A real \`sync --once\` from the simulator (${BACKLOG} events) fills the queues; ${REPLICAS} consumer ` +
          'processes of the same name (the built dist/consumer, concurrency 4, lock 1 s) start together. For every ' +
          `${STALL_EVERY}th event a handler blocks its process for 2.5 s after its INSERT, inside the transaction: ` +
          "the job's lock is not renewed, another replica takes the job and waits on the first one's inbox row. " +
          'Effects go to a table without a unique key.',
      },
      async (rec) => {
        rec.injectedWhat = 'stalls';
        const world = await fed('consumer_replicas');
        const replicas = Array.from({ length: REPLICAS }, () =>
          spawnNode([CHILD], childEnv(world, { STALL_EVERY: String(STALL_EVERY), STALL_MS: '2500' })),
        );
        try {
          await waitFor(allCompleted(world), { timeoutMs: 180_000, what: 'every job completed' });
        } catch (err) {
          const counts = await jobCounts(world.box);
          const tails = replicas.map(
            (c) =>
              c.stderr().slice(-500) +
              c
                .stdout()
                .split('\n')
                .filter((l) => /"level":(40|50)/.test(l))
                .slice(-3)
                .join('\n'),
          );
          throw new Error(
            `${(err as Error).message}: ${JSON.stringify(counts)} effects ${await effectCount(world)}\n${tails.join('\n---\n')}`,
          );
        } finally {
          for (const child of replicas) child.signal('SIGTERM');
        }
        const exits = await Promise.all(replicas.map((c) => c.waitExit(30_000)));
        const seen = replicas.reduce((sum, c) => sum + seenBefore(c), 0);
        const stalled = world.events.filter((id) => Number(id.replace(/\D/g, '')) % STALL_EVERY === 0).length;
        rec.injected = stalled;
        const effects = await effectsOf(world);
        const { rows } = await pool.query<{ pid: number; n: number }>(
          `SELECT pid, count(*)::int AS n FROM "${world.app}".effects GROUP BY pid ORDER BY pid`,
        );
        rec.checked = world.events.length;
        rec.lost = effects.lost;
        rec.duplicated = effects.duplicated;
        rec.figures = [
          ['effects by replica', rows.map((r) => r.n).join(' / ')],
          ['jobs run again on another replica that found their inbox row', seen],
          ['replicas exiting 0 on SIGTERM', exits.filter((e) => e.code === 0).length],
        ];
        expect(effects).toMatchObject({ lost: 0, duplicated: 0 });
        expect(rows).toHaveLength(REPLICAS);
        // The stalls did hand jobs to a second replica: the inbox is what kept them to one effect.
        expect(seen).toBeGreaterThan(0);
        expect(exits.map((e) => e.code)).toEqual(Array(REPLICAS).fill(0));
      },
    );
  });

  it('43. a replica frozen with a job in its transaction while another starts: no replica stalls', async () => {
    const HANDLER_TIMEOUT_MS = 3_000;
    await measured(
      {
        item: 43,
        title: 'consumer replica frozen mid-transaction',
        claim:
          "A consumer replica frozen while it holds a job's transaction (a paused pod, a hung call) stalls no " +
          'other replica: a replica starting meanwhile migrates without a lock and runs, the others go on, and ' +
          'Postgres ends the frozen transaction after handlerTimeoutMs, so its job runs elsewhere, once.',
        method:
          `A real \`sync --once\` from the simulator (${BACKLOG} events) fills the queues; two consumer processes ` +
          '(the built dist/consumer, lock 1 s) run; the handler of one chosen event hangs in its transaction on ' +
          `the first, which the test then freezes with SIGSTOP (handlerTimeoutMs ${HANDLER_TIMEOUT_MS} ms). A ` +
          'third replica starts (migrate() and run()) while it is frozen; the test waits for every job to ' +
          'complete, then resumes the frozen one and stops all three. Effects go to a table without a unique key.',
      },
      async (rec) => {
        rec.injectedWhat = 'SIGSTOP mid-transaction';
        const world = await fed('consumer_frozen');
        const hangId = world.events[Math.floor(world.events.length / 3)]!;
        const timeout = { HANDLER_TIMEOUT_MS: String(HANDLER_TIMEOUT_MS) };
        const frozen = spawnNode([CHILD], childEnv(world, { ...timeout, HANG_ID: hangId }));
        const started: RunningChild[] = [];
        let frozenAt = 0;
        try {
          // Alone until its handler hangs, so that the chosen event is its own.
          await waitFor(() => frozen.stdout().includes('hanging'), {
            timeoutMs: 60_000,
            what: 'the handler hung',
          });
          started.push(spawnNode([CHILD], childEnv(world, timeout)));
          frozen.signal('SIGSTOP');
          frozenAt = await effectCount(world);
          rec.injected++;
          // The replica starting while the other is frozen: migrate(), then run().
          started.push(spawnNode([CHILD], childEnv(world, timeout)));
          await waitFor(allCompleted(world), { timeoutMs: 120_000, what: 'every job completed' });
        } finally {
          frozen.signal('SIGCONT');
          for (const child of [frozen, ...started]) child.signal('SIGTERM');
        }
        const exits = await Promise.all([frozen, ...started].map((c) => c.waitExit(40_000)));
        const effects = await effectsOf(world);
        const jobs = await jobCounts(world.box);
        const { rows } = await pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM "${world.app}".effects WHERE pid = $1`,
          [started[1]?.process.pid],
        );
        rec.checked = world.events.length;
        rec.lost = effects.lost;
        rec.duplicated = effects.duplicated;
        rec.figures = [
          ['effects when the replica froze / at the end', `${frozenAt} / ${effects.rows}`],
          ['effects by the replica started while the other was frozen', rows[0]?.n ?? 0],
          ['jobs completed / failed', `${jobs.completed} / ${jobs.failed}`],
          ['replicas exiting 0 on SIGTERM', exits.filter((e) => e.code === 0).length],
        ];
        expect(effects).toMatchObject({ lost: 0, duplicated: 0 });
        expect(jobs).toEqual({ completed: world.events.length, failed: 0 });
        expect(frozenAt).toBeLessThan(world.events.length);
        expect(exits.map((e) => e.code)).toEqual([0, 0, 0]);
      },
    );
  });
});
