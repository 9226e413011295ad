import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Simulator } from '../../src/simulator/index.js';
import { CLI, killChildren, spawnNode, waitFor } from '../support/processes.js';
import { TEST_QUEUE_BACKEND } from '../support/queues.js';
import { between, seeded } from '../support/random.js';
import { startTestSimulator, TEST_API_KEY } from '../support/simulator.js';
import { followAdds } from './support/add-counter.js';
import { fateOf } from './support/fate.js';
import { type FeedGate, startFeedGate } from './support/feed-gate.js';
import { measured } from './support/results.js';
import { type Sandbox, useSandboxes } from './support/sandbox.js';
import { readWholeFeed, routed } from './support/served.js';

const SEED = 0x5eed01;
const KILLS = 50;
const EVENTS = 20_000;
const LATENCY_MS = 3;
const sandbox = useSandboxes();
let sim: Simulator;
let gate: FeedGate;

beforeAll(async () => {
  sim = await startTestSimulator({ backlog: EVENTS, faults: { latencyMs: LATENCY_MS } });
  gate = await startFeedGate(sim.baseUrl);
});
afterAll(async () => {
  await killChildren();
  await gate.close();
  await sim.close();
});

/** The cursor's feed position (simulator ids are `evt_` and the position). */
async function position(box: Sandbox): Promise<number> {
  const { rows } = await box.store.pool.query<{ after_id: string | null }>(
    `SELECT after_id FROM "${box.schema}".cursors WHERE source = 'default'`,
  );
  const id = rows[0]?.after_id;
  return id ? Number(id.slice(4)) : 0;
}

it('1. kill -9 loop: 50 SIGKILLs during a 20,000-event catch-up lose and duplicate nothing', async () => {
  await measured(
    {
      item: 1,
      title: 'kill -9 loop',
      claim:
        'A worker killed with SIGKILL at any moment loses nothing and duplicates nothing: ' +
        'the next run carries on from the last commit, and every event gets its job once.',
      method:
        `\`feedsync sync --once\` (the built CLI) against the simulator holding ${EVENTS} events, ` +
        `with ${LATENCY_MS} ms of latency on every page, is killed with SIGKILL ${KILLS} times: a fifth of the kills, ` +
        `drawn from a seeded generator (seed 0x${SEED.toString(16)}), during start-up (0–400 ms after spawn), the rest ` +
        'at feed positions drawn from the same generator over the first 90% of the feed: a proxy in front of the ' +
        'simulator holds the first page request at or past the position, and the kill follows 0–40 ms later, while ' +
        'the pages before it may still be committing and their jobs publishing. Kills are timed from progress, not ' +
        'from the clock, so every one lands before the catch-up is complete whatever the speed of the machine. ' +
        "After each kill the next run starts once the killed run's lease has run out (SOURCE_LEASE_MS=1000); " +
        'then runs are started until one exits 0 on its own. ' +
        (TEST_QUEUE_BACKEND === 'postgres'
          ? "Jobs are counted from the rows offered to BullMQ's job table (a trigger before and one after each " +
            'INSERT: stored, or a re-add it ignored).'
          : "Jobs are counted from BullMQ's own event stream (`added`, and `duplicated` for a re-add it ignored)."),
    },
    async (rec) => {
      rec.injectedWhat = 'SIGKILLs';
      const box = await sandbox('kill_loop');
      const adds = await followAdds(box);
      const random = seeded(SEED);
      // The feed positions past which the kills along the catch-up fall, in order.
      const targets = Array.from({ length: KILLS }, () => between(random, 0, 0.9 * EVENTS)).sort(
        (a, b) => a - b,
      );
      const killedAt: number[] = [];
      const progress: number[] = [];
      let midCatchUp = 0;
      let duringStartUp = 0;
      let attempts = 0;
      let finalCode: number | null = null;

      // Bounded: at most KILLS killed runs and a few more that must finish.
      for (; attempts < KILLS + 10; attempts++) {
        // A killed run's lease runs out this soon after; the next run waits for that (below).
        const env = box.env(gate.baseUrl, { SOURCE_LEASE_MS: '1000' });
        const started = performance.now();
        const child = spawnNode([CLI, 'sync', '--once'], env);
        if (rec.injected >= KILLS) {
          const result = await child.waitExit(120_000);
          finalCode = result.code;
          if (result.code === 0) break;
          continue;
        }
        const early = random() < 0.2;
        let exitedFirst = false;
        child.exited.then(() => (exitedFirst = true)).catch(() => {});
        // Timed from progress: the gate holds the run at the drawn position, so it cannot
        // complete the catch-up before the kill, however fast the machine.
        const at = await position(box);
        const held = gate.holdAt(Math.max(at + 1, targets[rec.injected] ?? at + 1));
        if (early) {
          await Promise.race([sleep(between(random, 0, 400)), child.exited]);
        } else {
          // The pause lets the pages before the held one commit and publish meanwhile.
          await Promise.race([held, child.exited]);
          await Promise.race([sleep(between(random, 0, 40)), child.exited]);
        }
        if (exitedFirst) {
          gate.open();
          // It finished before the chosen moment: that was not a kill; it must have succeeded.
          const result = await child.exited;
          finalCode = result.code;
          if (result.code === 0) break;
          continue;
        }
        child.signal('SIGKILL');
        await child.exited;
        gate.open();
        rec.injected++;
        // A statement the killed run sent before it died still runs, and commits (a lease
        // renewal among them): its sessions must end before its lease can be seen to run out.
        await waitFor(
          async () => {
            const { rows } = await box.store.pool.query<{ busy: number }>(
              `SELECT count(*)::int AS busy FROM pg_stat_activity
                WHERE application_name = 'feedsync' AND pid <> pg_backend_pid() AND query LIKE $1`,
              [`%"${box.schema}"%`],
            );
            return rows[0]!.busy === 0;
          },
          { what: "the killed run's sessions to end", timeoutMs: 10_000 },
        );
        // Until its lease runs out, the killed run still holds the source: a run started now would find it held.
        await waitFor(
          async () => {
            const { rows } = await box.store.pool.query(
              `SELECT FROM "${box.schema}".leases WHERE holder IS NOT NULL AND expires_at > now()`,
            );
            return rows.length === 0;
          },
          { what: "the killed run's lease to run out", timeoutMs: 10_000 },
        );
        killedAt.push(Math.round(performance.now() - started));
        if (early) duringStartUp++;
        const reached = await position(box);
        progress.push(reached);
        if (reached < EVENTS) midCatchUp++;
      }

      const counts = await adds.stop();
      const served = await readWholeFeed(sim.baseUrl, TEST_API_KEY);
      const fate = await fateOf(box, served);
      const jobIds = routed(served).map((e) => `default/${e.id}`);
      const addedOnce = jobIds.filter((id) => counts.added.get(id) === 1).length;
      const addedTwice = jobIds.filter((id) => (counts.added.get(id) ?? 0) > 1).length;
      const pages = sim.stats().requests['GET /api/events'] ?? {};
      const sortedKills = [...killedAt].sort((a, b) => a - b);
      rec.checked = fate.served;
      rec.lost = fate.lost;
      rec.duplicated = fate.duplicated + addedTwice;
      rec.figures = [
        ['events in the feed (simulator)', sim.stats().events],
        ['events stored', fate.stored],
        ['kills during start-up / along the catch-up', `${duringStartUp} / ${KILLS - duringStartUp}`],
        ['kills before the catch-up was complete', midCatchUp],
        ['cursor at the 10th / 25th / 50th kill', `${progress[9]} / ${progress[24]} / ${progress[49]}`],
        [
          'kill moments after spawn (min / median / max)',
          `${sortedKills[0]} / ${sortedKills[sortedKills.length >> 1]} / ${sortedKills.at(-1)} ms`,
        ],
        ['runs started (killed + finished)', attempts + 1],
        ['feed pages served, with re-reads after kills', pages['200'] ?? 0],
        ['jobs in BullMQ', fate.jobs],
        ['jobs BullMQ reports added exactly once', addedOnce],
        ['re-adds after a kill that BullMQ ignored (same jobId)', counts.ignored],
        ['outbox rows left unpublished', fate.unpublished],
        ['exit code of the last run', finalCode ?? 'none'],
      ];

      expect(rec.injected).toBe(KILLS);
      expect(finalCode).toBe(0);
      expect(fate.served).toBe(EVENTS);
      expect(fate).toMatchObject({ stored: EVENTS, lost: 0, duplicated: 0, strangers: 0, unpublished: 0 });
      expect(addedOnce).toBe(jobIds.length);
    },
  );
});
