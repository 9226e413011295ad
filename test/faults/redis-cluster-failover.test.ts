import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Simulator } from '../../src/simulator/index.js';
import {
  type ChildResult,
  CLI,
  killChildren,
  type RedisServer,
  runCli,
  spawnNode,
  waitFor,
} from '../support/processes.js';
import { command, type LocalCluster, startLocalCluster } from '../support/redis-topologies.js';
import { TEST_API_KEY } from '../support/simulator.js';
import { publishedRows, relayFailures, unpublishedRows } from './support/failover.js';
import { fateOf } from './support/fate.js';
import { simulators } from './support/fed-by-simulator.js';
import { prefixState } from './support/prefix-check.js';
import { measured } from './support/results.js';
import { type Sandbox, useSandboxes } from './support/sandbox.js';
import { readWholeFeed } from './support/served.js';

const EVENTS = 30_000;
/** The run against a cluster down for good needs only something to publish. */
const STRANDED_EVENTS = 2_000;
const NODE_TIMEOUT_MS = 2_000;
/** Generous bounds for a loaded machine: a run that outlasts them hangs. */
const RUN_BOUND_MS = 240_000;
const DEATH_BOUND_MS = 120_000;
const SIGTERM_BOUND_MS = 45_000;
const sandbox = useSandboxes();
const sims = simulators();
let cluster: LocalCluster;

beforeAll(async () => {
  cluster = await startLocalCluster(3, { replicas: 1, nodeTimeoutMs: NODE_TIMEOUT_MS });
}, 120_000);
afterAll(async () => {
  await killChildren();
  await sims.closeAll();
  await cluster?.dispose();
});

/** A node still running, to ask about the cluster. */
function live(): RedisServer {
  return cluster.nodes.find((n) => n.up)!;
}

/** The node that serves the slot of `prefix` now. */
async function slotOwner(prefix: string): Promise<RedisServer> {
  const port = live().port;
  const slot = Number(await command(port, ['CLUSTER', 'KEYSLOT', prefix]));
  const ranges = (await command(port, ['CLUSTER', 'SLOTS'])) as [number, number, [string, number]][];
  const owner = ranges.find(([from, to]) => slot >= from && slot <= to)?.[2][1];
  return cluster.nodes.find((n) => n.port === owner)!;
}

async function clusterState(): Promise<string> {
  return /cluster_state:(\w+)/.exec(String(await command(live().port, ['CLUSTER', 'INFO'])))?.[1] ?? '?';
}

function envOf(box: Sandbox, sim: Simulator, prefix: string): Record<string, string> {
  return box.env(sim.baseUrl, { REDIS_URL: cluster.url, QUEUE_PREFIX: prefix });
}

/** Runs again while a run exits 1 (at most twice more), once the cluster serves again. */
async function completeRuns(first: ChildResult, env: Record<string, string>): Promise<ChildResult[]> {
  const runs = [first];
  while (runs.at(-1)!.code !== 0 && runs.length < 3) {
    expect(runs.at(-1)!.code, runs.at(-1)!.stderr).toBe(1);
    await waitFor(async () => (await clusterState()) === 'ok', {
      timeoutMs: 60_000,
      what: 'cluster_state:ok',
    });
    runs.push(await runCli(['sync', '--once'], env, RUN_BOUND_MS));
  }
  return runs;
}

it('21. Cluster master kill -9 mid-run: no hang, and a run that exits 0 has every job on the promoted replica', async () => {
  await measured(
    {
      item: 21,
      title: 'Redis Cluster master killed mid-run',
      claim:
        "With default settings on a Cluster whose masters have replicas (a batch counts as published once the queues' " +
        "master's replica holds it), `kill -9` of the master that owns the queues' slot in the middle of " +
        '`sync --once` neither hangs the run nor loses a job: a run that exits 0 has every job on the promoted ' +
        'replica, a run that exits 1 is completed by the next. A cluster down for good (`cluster_state:fail`) ends ' +
        'a once run with exit 1 within a minute, the events stored and the outbox left for the next run, and the ' +
        'first SIGTERM ends a run within 30 s.',
      method:
        `Three masters with a replica each, private redis-servers with \`cluster-node-timeout ${NODE_TIMEOUT_MS}\`. ` +
        `(a) \`feedsync sync --once\` of ${EVENTS.toLocaleString('en-US')} events with a hash-tagged prefix; once a ` +
        "third are published, SIGKILL of the master that owns the prefix's slot; runs again while a run exits 1; " +
        'every job id compared with the events table on the promoted replica. (b) SIGKILL of that promoted replica ' +
        `too (its slots left without a node: \`cluster_state:fail\`); \`sync --once\` of ${STRANDED_EVENTS.toLocaleString('en-US')} ` +
        'events, then another run sent SIGTERM after its first failed publish; both killed nodes restarted ' +
        '(empty) and a run completes the outbox.',
    },
    async (rec) => {
      rec.injectedWhat = 'master SIGKILLs';
      // (a) the queues' master killed in the middle of a run.
      const simA = await sims.start(EVENTS, 1);
      const boxA = await sandbox('cluster_failover');
      const prefixA = `{${boxA.prefix}}`;
      const envA = envOf(boxA, simA, prefixA);
      const victim = await slotOwner(prefixA);
      const started = performance.now();
      const run = spawnNode([CLI, 'sync', '--once', '--migrate'], envA);
      await waitFor(async () => (await publishedRows(boxA)) >= EVENTS / 3, {
        timeoutMs: RUN_BOUND_MS,
        what: 'a third of the events published',
      });
      await victim.stop('SIGKILL');
      rec.injected++;
      const killedAt = performance.now();
      const firstA = await run.waitExit(DEATH_BOUND_MS);
      const killToExitA = Math.round(performance.now() - killedAt);
      const runsA = await completeRuns(firstA, envA);
      const promoted = await slotOwner(prefixA);
      const servedA = await readWholeFeed(simA.baseUrl, TEST_API_KEY);
      const fateA = await fateOf(
        { store: boxA.store, prefix: prefixA, redisUrl: promoted.url, queueUrl: null },
        servedA,
      );
      const failuresA = relayFailures(`${firstA.stdout}${firstA.stderr}`);

      // (b) the promoted replica killed too: its slots have no node left.
      await promoted.stop('SIGKILL');
      rec.injected++;
      await waitFor(async () => (await clusterState()) === 'fail', {
        timeoutMs: 60_000,
        what: 'cluster_state:fail',
      });
      const simB = await sims.start(STRANDED_EVENTS, 0);
      const boxB = await sandbox('cluster_down');
      const prefixB = `{${boxB.prefix}}`;
      const envB = envOf(boxB, simB, prefixB);
      const downStarted = performance.now();
      const down = await runCli(['sync', '--once', '--migrate'], envB, DEATH_BOUND_MS);
      const downMs = Math.round(performance.now() - downStarted);
      const storedB = (await prefixState(boxB.store, 100)).stored;
      const leftB = await unpublishedRows(boxB);

      const termed = spawnNode([CLI, 'sync', '--once'], envB);
      await waitFor(() => termed.stdout().includes('outbox relay failed'), {
        timeoutMs: DEATH_BOUND_MS,
        what: 'the first failed publish of the run to be ended by SIGTERM',
      });
      const sent = performance.now();
      termed.signal('SIGTERM');
      const term = await termed.waitExit(SIGTERM_BOUND_MS);
      const termMs = Math.round(performance.now() - sent);

      await promoted.start();
      await victim.start();
      await waitFor(async () => (await clusterState()) === 'ok', {
        timeoutMs: 60_000,
        what: 'cluster_state:ok',
      });
      const runsB = await completeRuns(await runCli(['sync', '--once'], envB, RUN_BOUND_MS), envB);
      const servedB = await readWholeFeed(simB.baseUrl, TEST_API_KEY);
      const ownerB = await slotOwner(prefixB);
      const fateB = await fateOf(
        { store: boxB.store, prefix: prefixB, redisUrl: ownerB.url, queueUrl: null },
        servedB,
      );
      const log = [...runsA, down, term, ...runsB].map((r) => `${r.stdout}${r.stderr}`).join('\n');

      rec.checked = fateA.served + fateB.served;
      rec.lost = fateA.lost + fateB.lost;
      rec.duplicated = fateA.duplicated + fateB.duplicated;
      rec.figures = [
        ['(a) exit codes of the runs, in order', runsA.map((r) => r.code ?? 'signal').join(', ')],
        [
          '(a) first run: duration / from the kill to its exit',
          `${Math.round(killedAt - started) + killToExitA} ms / ${killToExitA} ms`,
        ],
        [
          '(a) first run: relay failures / of them REDIS_NOT_REPLICATED',
          `${failuresA.failures} / ${failuresA.notReplicated}`,
        ],
        ['(a) jobs on the promoted replica / missing', `${fateA.jobs} / ${fateA.jobsMissing}`],
        ['(b) cluster down: exit code / time to exit', `${down.code ?? 'signal'} / ${downMs} ms`],
        ['(b) cluster down: events stored / outbox rows left for the next run', `${storedB} / ${leftB}`],
        [
          '(b) SIGTERM while publishing fails: exit code / time to exit',
          `${term.code ?? term.signal} / ${termMs} ms`,
        ],
        [
          '(b) after the restarts: exit codes of the runs, in order',
          runsB.map((r) => r.code ?? 'signal').join(', '),
        ],
      ];

      expect(log).not.toContain(TEST_API_KEY);
      expect(fateA).toMatchObject({ lost: 0, duplicated: 0, strangers: 0, unpublished: 0, jobs: EVENTS });
      expect(down.code).toBe(1);
      expect(storedB).toBe(STRANDED_EVENTS);
      expect(leftB).toBe(STRANDED_EVENTS);
      expect(term.signal).toBeNull();
      expect(fateB).toMatchObject({
        lost: 0,
        duplicated: 0,
        strangers: 0,
        unpublished: 0,
        jobs: STRANDED_EVENTS,
      });
    },
  );
}, 900_000);
