import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  CLI,
  killChildren,
  type RedisServer,
  runCli,
  spawnNode,
  startRedisServer,
  waitFor,
} from '../support/processes.js';
import { jobIds } from './support/fate.js';
import { fateOfFeed, simulators } from './support/fed-by-simulator.js';
import { prefixState } from './support/prefix-check.js';
import { measured } from './support/results.js';
import { type Sandbox, useSandboxes } from './support/sandbox.js';

const sandbox = useSandboxes();
const sims = simulators();
let redis: RedisServer;

beforeAll(async () => {
  // Append-only file fsynced on every write: a restart keeps the jobs, as in production.
  redis = await startRedisServer({ persist: true });
});
afterAll(async () => {
  await killChildren();
  await sims.closeAll();
  await redis?.dispose();
});

const simulator = sims.start;
const fate = fateOfFeed;

async function unpublished(box: Sandbox): Promise<number> {
  const { rows } = await box.store.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${box.schema}".outbox WHERE published_at IS NULL`,
  );
  return rows[0]!.n;
}

/** FLUSHALL on the private redis-server this file started (its admin client: never the shared one on 6379). */
async function flush(): Promise<void> {
  const client = redis.admin();
  try {
    await client.flushall();
  } finally {
    client.disconnect();
  }
}

async function requeue(box: Sandbox, since: string): Promise<number> {
  const result = await runCli(['requeue', '--since', since, '--json'], box.env(null), 60_000);
  expect(result.code, result.stderr).toBe(0);
  return (JSON.parse(result.stdout) as { requeued: number }).requeued;
}

it('5. Redis stopped, and Redis flushed: storing goes on; requeue re-drives the jobs with the same ids', async () => {
  await measured(
    {
      item: 5,
      title: 'Redis stopped, Redis flushed',
      claim:
        'With Redis gone, events are still stored and the run exits 1; the outbox drains when Redis returns. After ' +
        'Redis lost its data, `feedsync requeue --since` puts every job back once, with the same job ids.',
      method:
        'A private redis-server (append-only file, fsync always) that the test stops and starts. ' +
        '(a) `feedsync sync --once` while it is stopped, then again after it is started; ' +
        '(b) stopped in the middle of a 20,000-event catch-up, started after the run ended; ' +
        '(c) FLUSHALL after every job was added, then `feedsync requeue --since <time>` (twice), and ' +
        'FLUSHALL again followed by `requeue --since <event id>` and `--since <time>`.',
    },
    async (rec) => {
      rec.injectedWhat = 'Redis outages and flushes';
      // (a) stopped before the run.
      const simA = await simulator(5_000);
      const boxA = await sandbox('redis_down', { redisUrl: redis.url });
      await redis.stop();
      rec.injected++;
      const startedA = performance.now();
      const down = await runCli(['sync', '--once'], boxA.env(simA.baseUrl), 120_000);
      const downMs = Math.round(performance.now() - startedA);
      const storedWhileDown = (await prefixState(boxA.store, 100)).stored;
      const backlogWhileDown = await unpublished(boxA);
      await redis.start();
      expect(down.code).toBe(1);
      expect(storedWhileDown).toBe(5_000);
      expect(backlogWhileDown).toBe(5_000);
      const up = await runCli(['sync', '--once'], boxA.env(simA.baseUrl), 120_000);
      expect(up.code, up.stderr).toBe(0);
      const fateA = await fate(boxA, simA);

      // (b) stopped in the middle of a catch-up.
      const simB = await simulator(20_000, 3);
      const boxB = await sandbox('redis_mid_run', { redisUrl: redis.url });
      const startedB = new Date(Date.now() - 1000).toISOString();
      const child = spawnNode([CLI, 'sync', '--once'], boxB.env(simB.baseUrl));
      await waitFor(async () => (await prefixState(boxB.store, 100)).stored >= 3_000, {
        timeoutMs: 60_000,
        what: '3000 events stored',
      });
      const jobsAtStop = (await jobIds(redis.url, boxB.prefix)).length;
      await redis.stop();
      rec.injected++;
      const midRun = await child.waitExit(120_000);
      const storedB = (await prefixState(boxB.store, 100)).stored;
      const backlogB = await unpublished(boxB);
      await redis.start();
      expect(midRun.code).toBe(1);
      expect(storedB).toBe(20_000);
      expect(backlogB).toBeGreaterThan(0);
      const drained = await runCli(['sync', '--once'], boxB.env(simB.baseUrl), 120_000);
      expect(drained.code, drained.stderr).toBe(0);
      const fateB = await fate(boxB, simB);
      const before = (await jobIds(redis.url, boxB.prefix)).sort();

      // (c) flushed after the jobs were added.
      await flush();
      rec.injected++;
      const afterFlush = (await jobIds(redis.url, boxB.prefix)).length;
      const requeued = await requeue(boxB, startedB);
      const back = (await jobIds(redis.url, boxB.prefix)).sort();
      const again = await requeue(boxB, startedB);
      const backAgain = (await jobIds(redis.url, boxB.prefix)).length;
      await flush();
      rec.injected++;
      const fromEvent = await requeue(boxB, 'evt_000000010001');
      const fromEventJobs = (await jobIds(redis.url, boxB.prefix)).sort();
      const rest = await requeue(boxB, startedB);
      const fateC = await fate(boxB, simB);
      const quiet = await runCli(['sync', '--once'], boxB.env(simB.baseUrl), 60_000);
      const afterSync = (await jobIds(redis.url, boxB.prefix)).length;

      rec.checked = fateA.served + fateB.served;
      rec.lost = fateA.lost + fateC.lost;
      rec.duplicated = fateA.duplicated + fateC.duplicated;
      rec.figures = [
        ['(a) exit code with Redis stopped', down.code ?? 'signal'],
        [
          '(a) events stored / outbox rows waiting while Redis was stopped',
          `${storedWhileDown} / ${backlogWhileDown}`,
        ],
        ['(a) time until the run gave up draining', `${downMs} ms`],
        [
          '(b) jobs in Redis when it was stopped / events stored by the end of that run',
          `${jobsAtStop} / ${storedB}`,
        ],
        [
          '(b) exit code of that run / outbox rows left for the next',
          `${midRun.code ?? 'signal'} / ${backlogB}`,
        ],
        ['(c) jobs left after FLUSHALL', afterFlush],
        [
          '(c) rows re-driven by requeue --since <time> / jobs back, same ids',
          `${requeued} / ${back.length}`,
        ],
        ['(c) rows re-driven by a second requeue / jobs after it', `${again} / ${backAgain}`],
        ['(c) after another FLUSHALL: requeue --since evt_000000010001 re-drove', fromEvent],
        ['(c) jobs added by a sync run after the requeues', afterSync - fateC.jobs],
      ];

      expect(fateA).toMatchObject({ lost: 0, duplicated: 0, strangers: 0, unpublished: 0 });
      expect(fateB).toMatchObject({ lost: 0, duplicated: 0, strangers: 0, unpublished: 0 });
      expect(afterFlush).toBe(0);
      expect(requeued).toBe(20_000);
      expect(back).toEqual(before);
      expect(again).toBe(20_000);
      expect(backAgain).toBe(20_000);
      expect(fromEvent).toBe(10_000);
      expect(fromEventJobs).toEqual(before.slice(10_000));
      expect(rest).toBe(20_000);
      expect(fateC).toMatchObject({ lost: 0, duplicated: 0, strangers: 0, unpublished: 0, jobs: 20_000 });
      expect(quiet.code).toBe(0);
      expect(afterSync).toBe(20_000);
    },
  );
});
