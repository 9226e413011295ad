import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Simulator } from '../../src/simulator/index.js';
import { type ChildResult, CLI, killChildren, runCli, spawnNode, waitFor } from '../support/processes.js';
import { command, info, type LocalSentinel, startLocalSentinel } from '../support/redis-topologies.js';
import { TEST_API_KEY } from '../support/simulator.js';
import { publishedRows, relayFailures, unpublishedRows } from './support/failover.js';
import { type Fate, fateOf } from './support/fate.js';
import { simulators } from './support/fed-by-simulator.js';
import { measured } from './support/results.js';
import { type Sandbox, useSandboxes } from './support/sandbox.js';
import { readWholeFeed } from './support/served.js';

const EVENTS = 30_000;
/** The loss-window case needs only enough jobs in flight at the failover. */
const UNWAITED_EVENTS = 10_000;
const RUN_BOUND_MS = 240_000;
const sandbox = useSandboxes();
const sims = simulators();
let set: LocalSentinel;

beforeAll(async () => {
  set = await startLocalSentinel('feedsync-fault', { sentinels: 3 });
}, 120_000);
afterAll(async () => {
  await killChildren();
  await sims.closeAll();
  await set?.dispose();
});

function envOf(box: Sandbox, sim: Simulator, extra: Record<string, string> = {}): Record<string, string> {
  return box.env(sim.baseUrl, {
    REDIS_SENTINELS: set.sentinels.map((s) => `127.0.0.1:${s.port}`).join(','),
    REDIS_SENTINEL_NAME: set.name,
    ...extra,
  });
}

/** Waits until the master the Sentinels name has a replica in sync and known to every Sentinel, so a failover can pick it. */
async function replicaReady(): Promise<void> {
  await waitFor(
    async () => {
      const port = await set.masterPort();
      if (!/^connected_slaves:[1-9]/m.test(await info(port, 'replication'))) return false;
      for (const s of set.sentinels) {
        const replicas = (await command(s.port, ['SENTINEL', 'REPLICAS', set.name])) as string[][];
        const usable = replicas.some((fields) => {
          const f = Object.fromEntries(fields.flatMap((v, i) => (i % 2 === 0 ? [[v, fields[i + 1]]] : [])));
          return f['master-link-status'] === 'ok' && !String(f.flags).includes('down');
        });
        if (!usable) return false;
      }
      return true;
    },
    { timeoutMs: 60_000, what: 'a replica in sync that every Sentinel knows' },
  );
}

/**
 * `sync --once` with SENTINEL FAILOVER once a third of the events are published;
 * runs again while a run exits non-zero (at most twice more). Returns the fate on
 * the master the Sentinels name at the end.
 */
async function failoverRun(box: Sandbox, sim: Simulator, events: number, extra: Record<string, string> = {}) {
  await replicaReady();
  const before = await set.masterPort();
  const env = envOf(box, sim, extra);
  const started = performance.now();
  const run = spawnNode([CLI, 'sync', '--once', '--migrate'], env);
  await waitFor(async () => (await publishedRows(box)) >= events / 3, {
    timeoutMs: RUN_BOUND_MS,
    what: 'a third of the events published',
  });
  const failoverAt = new Date(Date.now() - 1000).toISOString();
  const askedAt = performance.now();
  await command(set.sentinel.port, ['SENTINEL', 'FAILOVER', set.name]);
  await waitFor(async () => (await set.masterPort()) !== before, {
    timeoutMs: 60_000,
    what: 'the Sentinels to name a new master',
  });
  const switchMs = Math.round(performance.now() - askedAt);
  const first = await run.waitExit(RUN_BOUND_MS);
  const firstMs = Math.round(performance.now() - started);
  const runs: ChildResult[] = [first];
  while (runs.at(-1)!.code !== 0 && runs.length < 3) {
    expect(runs.at(-1)!.code, runs.at(-1)!.stderr).toBe(1);
    await replicaReady();
    runs.push(await runCli(['sync', '--once'], env, RUN_BOUND_MS));
  }
  const log = runs.map((r) => `${r.stdout}${r.stderr}`).join('\n');
  expect(log).not.toContain(TEST_API_KEY);
  const served = await readWholeFeed(sim.baseUrl, TEST_API_KEY);
  const master = `redis://127.0.0.1:${await set.masterPort()}`;
  const fate = async (): Promise<Fate> =>
    fateOf({ store: box.store, prefix: box.prefix, redisUrl: master, queueUrl: null }, served);
  return {
    runs,
    firstMs,
    switchMs,
    failoverAt,
    env,
    fate,
    first: relayFailures(`${first.stdout}${first.stderr}`),
  };
}

it('20. Sentinel failover in the middle of a run: a run that exits 0 has every job on the new master', async () => {
  await measured(
    {
      item: 20,
      title: 'Redis Sentinel failover mid-run',
      claim:
        'With default settings under Sentinel (a batch counts as published once a replica holds it), a failover ' +
        'in the middle of `sync --once` loses no job: a run that exits 0 has every job on the new master, and a run ' +
        'that exits 1 is completed by the next, nothing lost or doubled. With `REDIS_WAIT_REPLICAS=0` the last ' +
        'jobs of the old master may be lost, and `requeue --since` puts them back.',
      method:
        'A master, one replica and three Sentinels (quorum 2, down after 1 s), all private redis-servers. ' +
        `(a) \`feedsync sync --once\` of ${EVENTS.toLocaleString('en-US')} events, default settings, with ` +
        '`SENTINEL FAILOVER` once a third of them are published; runs again while a run exits 1; every job id ' +
        'compared with the events table on the master the Sentinels name at the end. ' +
        `(b) The same with ${UNWAITED_EVENTS.toLocaleString('en-US')} events and \`REDIS_WAIT_REPLICAS=0\` (the ` +
        'failover back), then `feedsync requeue --since <a second before the failover>`. (c) Without a failover, ' +
        'runs of the same events with the default and with `REDIS_WAIT_REPLICAS=0`, alternating, for the cost of the wait.',
    },
    async (rec) => {
      rec.injectedWhat = 'Sentinel failovers';
      const simA = await sims.start(EVENTS, 1);
      const boxA = await sandbox('sentinel_failover');
      const a = await failoverRun(boxA, simA, EVENTS);
      rec.injected++;
      const fateA = await a.fate();

      const simB = await sims.start(UNWAITED_EVENTS, 1);
      const boxB = await sandbox('sentinel_unwaited');
      const b = await failoverRun(boxB, simB, UNWAITED_EVENTS, { REDIS_WAIT_REPLICAS: '0' });
      rec.injected++;
      const fateB = await b.fate();
      const requeued = await runCli(['requeue', '--since', b.failoverAt, '--json'], b.env, RUN_BOUND_MS);
      expect(requeued.code, requeued.stderr).toBe(0);
      const fateBAfter = await b.fate();

      // (c) What the wait costs without a failover: runs side by side, alternating.
      const simC = await sims.start(EVENTS, 1);
      const costs: Record<'waited' | 'unwaited', number[]> = { waited: [], unwaited: [] };
      let costFailures = 0;
      for (const kind of ['waited', 'unwaited', 'unwaited', 'waited'] as const) {
        // The old master of (b) rejoins as a replica by a full resync: the cost of the wait is measured after it.
        await replicaReady();
        const box = await sandbox(`sentinel_cost_${kind}`);
        const extra: Record<string, string> = kind === 'unwaited' ? { REDIS_WAIT_REPLICAS: '0' } : {};
        const t0 = performance.now();
        const res = await runCli(['sync', '--once', '--migrate'], envOf(box, simC, extra), RUN_BOUND_MS);
        costs[kind].push(Math.round(performance.now() - t0));
        costFailures += relayFailures(`${res.stdout}${res.stderr}`).failures;
        expect(res.code, res.stderr).toBe(0);
      }

      rec.checked = fateA.served + fateB.served;
      rec.lost = fateA.lost + fateBAfter.lost;
      rec.duplicated = fateA.duplicated + fateBAfter.duplicated;
      rec.figures = [
        ['(a) exit codes of the runs, in order', a.runs.map((r) => r.code ?? 'signal').join(', ')],
        [
          '(a) first run: duration / Sentinels naming the new master after the ask',
          `${a.firstMs} ms / ${a.switchMs} ms`,
        ],
        [
          '(a) first run: relay failures / of them REDIS_NOT_REPLICATED',
          `${a.first.failures} / ${a.first.notReplicated}`,
        ],
        ['(a) jobs on the new master / missing', `${fateA.jobs} / ${fateA.jobsMissing}`],
        ['(b) exit codes of the runs, in order', b.runs.map((r) => r.code ?? 'signal').join(', ')],
        ['(b) jobs missing on the new master after the runs (the loss window)', fateB.jobsMissing],
        ['(b) jobs missing after requeue --since', fateBAfter.jobsMissing],
        [
          `(c) no failover, ${EVENTS.toLocaleString('en-US')} events: runs with the wait / with REDIS_WAIT_REPLICAS=0`,
          `${costs.waited.join(' and ')} ms / ${costs.unwaited.join(' and ')} ms`,
        ],
        ['(c) relay failures in those runs', costFailures],
      ];

      expect(fateA).toMatchObject({ lost: 0, duplicated: 0, strangers: 0, unpublished: 0, jobs: EVENTS });
      expect(await unpublishedRows(boxA)).toBe(0);
      expect(fateBAfter).toMatchObject({ lost: 0, duplicated: 0, strangers: 0, unpublished: 0 });
      expect(fateBAfter.jobs).toBe(UNWAITED_EVENTS);
    },
  );
}, 900_000);
