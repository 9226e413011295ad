import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Simulator } from '../../src/simulator/index.js';
import { CLI, killChildren, type RunningChild, spawnNode, waitFor } from '../support/processes.js';
import { between, seeded } from '../support/random.js';
import { startTestSimulator } from '../support/simulator.js';
import { fateOf } from './support/fate.js';
import { measured } from './support/results.js';
import { useSandboxes } from './support/sandbox.js';
import { readWholeFeed } from './support/served.js';

const SEED = 0x5eed16;
const SOURCES = 50;
const REPLICAS = 3;
const KILLS = 20;
const EVENTS = 200;
const LATENCY_MS = 5;
const keyOf = (i: number): string => `acct_test_fleet${i}`;
const lastId = `evt_${String(EVENTS).padStart(12, '0')}`;
const sandbox = useSandboxes();
const dir = mkdtempSync(join(tmpdir(), 'feedsync-fleet-'));
let sim: Simulator;

beforeAll(async () => {
  sim = await startTestSimulator({ faults: { latencyMs: LATENCY_MS } });
  for (let i = 0; i < SOURCES; i++) sim.account(keyOf(i)).setBacklog(EVENTS);
});
afterAll(async () => {
  await killChildren();
  await sim.close();
  rmSync(dir, { recursive: true, force: true });
});

it('16. kill loop over a fleet: 50 sources, 3 watch replicas, SIGKILLs while they hold sources', async () => {
  await measured(
    {
      item: 16,
      title: 'kill loop over many sources and replicas',
      claim:
        'Replicas killed with SIGKILL while they hold sources lose nothing and duplicate nothing: ' +
        'their leases run out (SOURCE_LEASE_MS, 3 s here), the other replicas claim the sources then ' +
        'and carry on from the last commit, and no source is mixed up with another.',
      method:
        `${REPLICAS} \`feedsync sync --watch\` replicas (the built CLI, SYNC_CONCURRENCY=4) share a sources file of ` +
        `${SOURCES} accounts of one simulator, ${EVENTS} events each with the same ids in every account, ` +
        `pages of 10 and ${LATENCY_MS} ms of latency. ${KILLS} times, at moments drawn from a seeded generator ` +
        `(seed 0x${SEED.toString(16)}), a replica that holds at least one source (pg_locks, by its application_name) ` +
        'is killed with SIGKILL and a new one started in its place; then the fleet runs until every cursor is at the end ' +
        "and the outbox is empty, and each account's stored events and jobs are compared with its own feed.",
    },
    async (rec) => {
      rec.injectedWhat = 'SIGKILLs';
      const box = await sandbox('fleet');
      const env: Record<string, string> = {};
      const sources = Array.from({ length: SOURCES }, (_, i) => {
        env[`KEY_${i}`] = keyOf(i);
        return { source: `acct-${i}`, api_key_env: `KEY_${i}` };
      });
      const file = join(dir, 'sources.json');
      writeFileSync(file, JSON.stringify({ sources }));
      const fleetEnv = box.env(sim.baseUrl, {
        ...env,
        FEED_SOURCES_FILE: file,
        FEED_PAGE_LIMIT: '10',
        SYNC_CONCURRENCY: '4',
        SYNC_INTERVAL_MS: '200',
        // A killed replica's sources are free again this soon after.
        SOURCE_LEASE_MS: '3000',
        METRICS_PORT: '0',
        LOG_LEVEL: 'info',
      });
      let started = 0;
      const start = (): { name: string; child: RunningChild } => {
        const name = `replica-${started++}`;
        return { name, child: spawnNode([CLI, 'sync', '--watch'], { ...fleetEnv, HOSTNAME: name }) };
      };
      const held = async (name: string): Promise<number> => {
        const { rows } = await box.store.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM "${box.schema}".leases
            WHERE holder LIKE $1 AND expires_at > now()`,
          [`${name}/%`],
        );
        return rows[0]!.n;
      };
      const caughtUp = async (): Promise<number> => {
        const { rows } = await box.store.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM "${box.schema}".cursors WHERE after_id = $1`,
          [lastId],
        );
        return rows[0]!.n;
      };

      const fleet = Array.from({ length: REPLICAS }, start);
      const random = seeded(SEED);
      const heldAtKill: number[] = [];
      // Bounded: each kill waits at most 60 s for its victim to hold a source.
      for (let k = 0; k < KILLS; k++) {
        await sleep(between(random, 50, 400));
        const slot = Math.floor(random() * REPLICAS);
        const victim = fleet[slot]!;
        const n = await waitFor(async () => (await held(victim.name)) || null, {
          what: `${victim.name} to hold a source`,
          timeoutMs: 60_000,
        });
        victim.child.signal('SIGKILL');
        await victim.child.exited;
        rec.injected++;
        heldAtKill.push(n);
        fleet[slot] = start();
      }
      const behindAtLastKill = SOURCES - (await caughtUp());

      await waitFor(async () => (await caughtUp()) === SOURCES, {
        what: 'every source caught up',
        timeoutMs: 180_000,
      });
      await waitFor(
        async () => {
          const { rows } = await box.store.pool.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM "${box.schema}".outbox WHERE published_at IS NULL`,
          );
          return rows[0]!.n === 0;
        },
        { what: 'the outbox drained', timeoutMs: 60_000 },
      );
      // A replica started at the last kill may still be starting: SIGTERM it once its loop runs.
      for (const r of fleet) {
        await waitFor(() => r.child.stdout().includes('"watching the feeds"'), {
          what: `${r.name} to start`,
          timeoutMs: 60_000,
        });
        r.child.signal('SIGTERM');
      }
      const ends = await Promise.all(fleet.map((r) => r.child.waitExit(30_000)));

      let stored = 0;
      let strangers = 0;
      let jobs = 0;
      for (let i = 0; i < SOURCES; i++) {
        const served = await readWholeFeed(sim.baseUrl, keyOf(i));
        const fate = await fateOf(box, served, `acct-${i}`);
        rec.checked += fate.served;
        rec.lost += fate.lost;
        rec.duplicated += fate.duplicated;
        stored += fate.stored;
        // Ids repeat across accounts; the content names the account: any other account's event is a stranger.
        const { rows } = await box.store.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM "${box.schema}".events WHERE source = $1 AND data->>'email_id' NOT LIKE $2`,
          [`acct-${i}`, `%${sim.account(keyOf(i)).id}%`],
        );
        strangers += fate.strangers + rows[0]!.n;
        jobs += fate.jobs;
      }
      const pages = sim.stats().requests['GET /api/events'] ?? {};
      const sortedHeld = [...heldAtKill].sort((a, b) => a - b);
      rec.figures = [
        ['accounts x events (same ids in every account)', `${SOURCES} x ${EVENTS}`],
        ['events stored, all sources', stored],
        ['jobs in BullMQ, all sources', jobs],
        ['replicas started (3 + one per kill)', started],
        [
          'sources held by the victim at its kill (min / median / max)',
          `${sortedHeld[0]} / ${sortedHeld[sortedHeld.length >> 1]} / ${sortedHeld.at(-1)}`,
        ],
        ['sources not yet caught up at the last kill', behindAtLastKill],
        ['feed pages served, with re-reads after kills', pages['200'] ?? 0],
        ['events stored under the wrong source', strangers],
        ['exit codes of the last replicas on SIGTERM', ends.map((e) => e.code).join(', ')],
      ];

      expect(rec.injected).toBe(KILLS);
      expect(Math.min(...heldAtKill)).toBeGreaterThan(0);
      expect(rec.checked).toBe(SOURCES * EVENTS);
      expect(stored).toBe(SOURCES * EVENTS);
      expect(rec.lost).toBe(0);
      expect(rec.duplicated).toBe(0);
      expect(strangers).toBe(0);
      for (const end of ends) expect(end.code).toBe(0);
    },
  );
  // 232 s under a load average of 20 on two cores; a few tens of seconds on a quiet machine.
}, 360_000);
