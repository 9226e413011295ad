import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Simulator } from '../../src/simulator/index.js';
import { TEST_DATABASE_URL } from '../support/postgres.js';
import { CLI, killChildren, type RunningChild, runCli, spawnNode, waitFor } from '../support/processes.js';
import { between, seeded } from '../support/random.js';
import { startTestSimulator, TEST_API_KEY } from '../support/simulator.js';
import { type Backends, named, watchBackends } from './support/backends.js';
import { fateOf } from './support/fate.js';
import { isPrefix, prefixState } from './support/prefix-check.js';
import { measured } from './support/results.js';
import { type Sandbox, useSandboxes } from './support/sandbox.js';
import { readWholeFeed } from './support/served.js';

const SEED = 0x5eed09;
const RUNS = 8;
const TWICE = 2;
const EARLY = 2;
const GRACE_MS = 30_000;
/** A run killed by a second SIGTERM cannot give its lease back: it runs out this soon after. */
const LEASE_MS = '1000';
const sandbox = useSandboxes();
let sim: Simulator;
let backends: Backends;

beforeAll(async () => {
  sim = await startTestSimulator({ backlog: 20_000, faults: { latencyMs: 3 } });
  backends = await watchBackends();
});
afterAll(async () => {
  await killChildren();
  await backends.close();
  await sim.close();
});

/** Starts a run and waits until it has opened its first Postgres session (its signal handlers are in place by then). */
async function startRun(box: Sandbox, n: number): Promise<RunningChild> {
  const app = `faults-term-${box.schema}-${n}`;
  const child = spawnNode(
    [CLI, 'sync', '--once'],
    box.env(sim.baseUrl, { DATABASE_URL: named(TEST_DATABASE_URL, app), SOURCE_LEASE_MS: LEASE_MS }),
  );
  let exited = false;
  child.exited.then(() => (exited = true)).catch(() => {});
  // Bounded by the child: it opens a session or exits.
  while (!exited && (await backends.count(app)) === 0) await sleep(5);
  return child;
}

/** Sends SIGTERM (twice when asked) and measures how long the exit takes. */
async function terminate(child: RunningChild, twice: boolean) {
  const sent = performance.now();
  child.signal('SIGTERM');
  if (twice) {
    await sleep(20);
    child.signal('SIGTERM');
  }
  const result = await child.waitExit(GRACE_MS + 10_000);
  return { result, ms: Math.round(performance.now() - sent) };
}

it('9. SIGTERM at random moments: exit 0 within the grace period, consistent state', async () => {
  await measured(
    {
      item: 9,
      title: 'SIGTERM at random moments',
      claim:
        'On SIGTERM a run finishes or rolls back the page in hand, gives its lease back and exits 0 well inside the ' +
        '30 s grace period; a second SIGTERM exits at once. Either way the store is consistent and the next run ' +
        'carries on.',
      method:
        `\`feedsync sync --once\` (the built CLI) over 20,000 events with 3 ms of feed latency. ${RUNS} runs get ` +
        `one SIGTERM at a moment drawn from a seeded generator (seed 0x${SEED.toString(16)}), 0–600 ms after the process opened its ` +
        `first Postgres session (its signal handlers are installed before that); ${TWICE} runs get two, 20 ms apart; ` +
        `${EARLY} runs get one 0–300 ms after spawn, while Node is still loading modules. After each, the store is ` +
        'checked (events exactly 1..cursor, an outbox row for each). A last run without signals must finish the feed.',
    },
    async (rec) => {
      rec.injectedWhat = 'SIGTERMs';
      const random = seeded(SEED);
      const box = await sandbox('sigterm');
      const exits: Record<string, number> = {};
      const onceMs: number[] = [];
      const twiceMs: number[] = [];
      const early: string[] = [];
      let inconsistent = 0;
      let checks = 0;
      const check = async () => {
        const state = await prefixState(box.store, 100);
        checks++;
        // No page alignment here: a turn's first request reads from the event before its
        // cursor (src/sync/cursor-check.ts) and gives that one back, so a run that starts
        // after a signal pages one event off the feed's hundreds. A prefix with an outbox
        // row for each event is what a commit keeps whole.
        if (!isPrefix(state) || state.outboxRows !== state.stored) inconsistent++;
      };
      for (let n = 0; n < RUNS + TWICE; n++) {
        const twice = n >= RUNS;
        const child = await startRun(box, n);
        await sleep(between(random, 0, 600));
        const { result, ms } = await terminate(child, twice);
        rec.injected += twice ? 2 : 1;
        const key = `${twice ? 'two SIGTERMs' : 'one SIGTERM'}: exit ${result.code ?? result.signal}`;
        exits[key] = (exits[key] ?? 0) + 1;
        (twice ? twiceMs : onceMs).push(ms);
        await check();
      }
      for (let n = 0; n < EARLY; n++) {
        const child = spawnNode([CLI, 'sync', '--once'], box.env(sim.baseUrl, { SOURCE_LEASE_MS: LEASE_MS }));
        await sleep(between(random, 0, 300));
        const { result } = await terminate(child, false);
        rec.injected++;
        early.push(String(result.code ?? result.signal));
        await check();
      }
      // A run that exited at a second SIGTERM could not give its lease back: it runs out first.
      await waitFor(
        async () =>
          (
            await box.store.pool.query(
              `SELECT FROM "${box.schema}".leases WHERE holder IS NOT NULL AND expires_at > now()`,
            )
          ).rows.length === 0,
        { what: 'the leases to run out', timeoutMs: 10_000 },
      );
      const last = await runCli(['sync', '--once'], box.env(sim.baseUrl), 120_000);
      const served = await readWholeFeed(sim.baseUrl, TEST_API_KEY);
      const fate = await fateOf(box, served);
      rec.checked = fate.served;
      rec.lost = fate.lost;
      rec.duplicated = fate.duplicated;
      rec.figures = [
        ...Object.entries(exits).map(([k, v]): [string, number] => [`runs, ${k}`, v]),
        ['time from SIGTERM to exit, one SIGTERM: max', `${Math.max(...onceMs)} ms`],
        ['time from the first SIGTERM to exit, two SIGTERMs: max', `${Math.max(...twiceMs)} ms`],
        ['SIGTERM during start-up: how those runs ended', early.join(', ')],
        ['store checks after a signal / inconsistent', `${checks} / ${inconsistent}`],
        ['exit code of the last run, without signals', last.code ?? 'signal'],
      ];

      expect(inconsistent).toBe(0);
      expect(last.code).toBe(0);
      expect(fate).toMatchObject({ lost: 0, duplicated: 0, strangers: 0, unpublished: 0 });
      expect(Math.max(...onceMs)).toBeLessThan(GRACE_MS);
      expect(Math.max(...twiceMs)).toBeLessThan(GRACE_MS);
      expect(exits[`one SIGTERM: exit 0`]).toBe(RUNS);
    },
  );
});
