import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Simulator } from '../../src/simulator/index.js';
import { TEST_DATABASE_URL } from '../support/postgres.js';
import { CLI, killChildren, type RunningChild, spawnNode, waitFor } from '../support/processes.js';
import { startTestSimulator } from '../support/simulator.js';
import { fateOf } from './support/fate.js';
import { measured } from './support/results.js';
import { type Sandbox, useSandboxes } from './support/sandbox.js';
import { readWholeFeed } from './support/served.js';
import { startStallingProxy } from './support/stalling-proxy.js';

const SOURCES = 2;
const EVENTS = 3_000;
const LEASE_MS = 3_000;
const INTERVAL_MS = 200;
/** How long the holder stays frozen or cut off: several leases, so that the others must take over. */
const OUTAGE_MS = 4 * LEASE_MS;
const keyOf = (i: number): string => `acct_test_lease${i}`;
const lastId = `evt_${String(EVENTS).padStart(12, '0')}`;
const sandbox = useSandboxes();
const dir = mkdtempSync(join(tmpdir(), 'feedsync-leases-'));
let sim: Simulator;

beforeAll(async () => {
  // Latency stretches each catch-up over many pages, so the fault lands mid-run.
  sim = await startTestSimulator({ faults: { latencyMs: 10 } });
  for (let i = 0; i < SOURCES; i++) sim.account(keyOf(i)).setBacklog(EVENTS);
});
afterAll(async () => {
  await killChildren();
  await sim.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Fleet {
  box: Sandbox;
  start(name: string, extra?: Record<string, string>): RunningChild;
  /** A source `name` holds now, mid catch-up, with its cursor; null when none. */
  heldMidway(name: string): Promise<{ source: string; cursor: string } | null>;
  holderOf(source: string): Promise<string | null>;
  cursorOf(source: string): Promise<string | null>;
  /** Waits for every source at the end and an empty outbox, stops the replicas, and checks each source's fate. */
  finish(
    replicas: RunningChild[],
  ): Promise<{ checked: number; lost: number; duplicated: number; codes: string }>;
}

async function fleet(label: string): Promise<Fleet> {
  const box = await sandbox(label);
  const env: Record<string, string> = {};
  const sources = Array.from({ length: SOURCES }, (_, i) => {
    env[`KEY_${i}`] = keyOf(i);
    return { source: `acct-${i}`, api_key_env: `KEY_${i}` };
  });
  const file = join(dir, `${label}.json`);
  writeFileSync(file, JSON.stringify({ sources }));
  const base = box.env(sim.baseUrl, {
    ...env,
    FEED_SOURCES_FILE: file,
    FEED_PAGE_LIMIT: '10',
    SYNC_INTERVAL_MS: String(INTERVAL_MS),
    SOURCE_LEASE_MS: String(LEASE_MS),
    METRICS_PORT: '0',
    LOG_LEVEL: 'info',
  });
  const q = async <T>(sql: string, params: unknown[]): Promise<T | null> =>
    ((await box.store.pool.query(sql, params)).rows[0] as T | undefined) ?? null;
  const cursorOf = async (source: string) =>
    (
      await q<{ after_id: string | null }>(`SELECT after_id FROM "${box.schema}".cursors WHERE source = $1`, [
        source,
      ])
    )?.after_id ?? null;
  return {
    box,
    start: (name, extra = {}) => spawnNode([CLI, 'sync', '--watch'], { ...base, HOSTNAME: name, ...extra }),
    heldMidway: (name) =>
      q<{ source: string; cursor: string }>(
        `SELECT l.source, c.after_id AS cursor FROM "${box.schema}".leases l
           JOIN "${box.schema}".cursors c ON c.source = l.source
          WHERE l.holder LIKE $1 AND l.expires_at > now() AND c.after_id IS NOT NULL AND c.after_id <> $2
          LIMIT 1`,
        [`${name}/%`, lastId],
      ),
    holderOf: async (source) =>
      (
        await q<{ holder: string | null }>(
          `SELECT holder FROM "${box.schema}".leases WHERE source = $1 AND expires_at > now()`,
          [source],
        )
      )?.holder ?? null,
    cursorOf,
    async finish(replicas) {
      for (let i = 0; i < SOURCES; i++) {
        await waitFor(async () => (await cursorOf(`acct-${i}`)) === lastId, {
          what: `acct-${i} caught up`,
          timeoutMs: 180_000,
        });
      }
      await waitFor(
        async () =>
          (await q<{ n: number }>(
            `SELECT count(*)::int AS n FROM "${box.schema}".outbox WHERE published_at IS NULL`,
            [],
          ))!.n === 0,
        { what: 'the outbox drained', timeoutMs: 60_000 },
      );
      for (const r of replicas) r.signal('SIGTERM');
      const ends = await Promise.all(replicas.map((r) => r.waitExit(30_000)));
      let checked = 0;
      let lost = 0;
      let duplicated = 0;
      for (let i = 0; i < SOURCES; i++) {
        const fate = await fateOf(box, await readWholeFeed(sim.baseUrl, keyOf(i)), `acct-${i}`);
        expect(fate).toMatchObject({ stored: EVENTS, lost: 0, duplicated: 0, strangers: 0, unpublished: 0 });
        checked += fate.served;
        lost += fate.lost;
        duplicated += fate.duplicated;
      }
      return { checked, lost, duplicated, codes: ends.map((e) => e.code).join(', ') };
    },
  };
}

const leaseLostLine = 'this worker lost the lease of the source';

/** Waits until replica-b holds `held`'s source and has moved its cursor on; returns the ms since `since`. */
function takenOverAfter(f: Fleet, held: { source: string; cursor: string }, since: number): Promise<number> {
  return waitFor(
    async () => {
      const holder = await f.holderOf(held.source);
      const cursor = await f.cursorOf(held.source);
      return holder?.startsWith('replica-b/') && cursor !== held.cursor
        ? Math.round(performance.now() - since)
        : null;
    },
    { what: `replica-b to take ${held.source} over`, timeoutMs: OUTAGE_MS, intervalMs: 50 },
  );
}

it('17. a replica frozen (SIGSTOP) in mid catch-up: its source moves on within the lease, nothing twice after it wakes', async () => {
  await measured(
    {
      item: 17,
      title: 'a replica frozen in mid catch-up',
      claim:
        'A replica that freezes while it holds a source loses it when its lease runs out: another replica takes ' +
        'the source over while the first is still frozen, and when the first wakes up its stale turn commits nothing ' +
        'more. Nothing is lost or stored twice.',
      method:
        `Two \`feedsync sync --watch\` replicas (the built CLI) over a sources file of ${SOURCES} accounts of one simulator, ` +
        `${EVENTS} events each, pages of 10, 10 ms of latency, SOURCE_LEASE_MS=${LEASE_MS}, SYNC_INTERVAL_MS=${INTERVAL_MS}; ` +
        'replica A runs one source at a time, B two. Once A holds a source in mid catch-up it is stopped with SIGSTOP ' +
        '(and B started) ' +
        `for ${OUTAGE_MS / 1000} s, then SIGCONT; the fleet runs until every cursor is at the end and the outbox is ` +
        "empty, and each account's stored events and jobs are compared with its feed.",
    },
    async (rec) => {
      rec.injectedWhat = 'SIGSTOPs';
      const f = await fleet('sigstop');
      const a = f.start('replica-a', { SYNC_CONCURRENCY: '1' });
      const held = await waitFor(() => f.heldMidway('replica-a'), {
        what: 'replica-a to hold a source mid catch-up',
        timeoutMs: 60_000,
      });
      a.signal('SIGSTOP');
      rec.injected++;
      const stoppedAt = performance.now();
      // Started now, so that it finds A's source held: it takes the other, then A's once the lease runs out.
      const b = f.start('replica-b', { SYNC_CONCURRENCY: '2' });
      // While A is still frozen: B holds the source and its cursor moves past where A left it.
      const movedAfterMs = await takenOverAfter(f, held, stoppedAt);
      const cursorWhileFrozen = await f.cursorOf(held.source);
      await sleep(Math.max(0, OUTAGE_MS - (performance.now() - stoppedAt)));
      a.signal('SIGCONT');
      await waitFor(() => a.stdout().includes(leaseLostLine), {
        what: 'replica-a to say it lost the lease',
        timeoutMs: 60_000,
      });
      const end = await f.finish([a, b]);
      rec.checked = end.checked;
      rec.lost = end.lost;
      rec.duplicated = end.duplicated;
      rec.figures = [
        ['accounts x events', `${SOURCES} x ${EVENTS}`],
        ['SOURCE_LEASE_MS / SYNC_INTERVAL_MS', `${LEASE_MS} / ${INTERVAL_MS}`],
        ['frozen source, cursor at the SIGSTOP', held.cursor],
        ['time from SIGSTOP until another replica moved the source on', `${movedAfterMs} ms`],
        ['its cursor while A was still frozen', cursorWhileFrozen ?? '(none)'],
        ['A, woken, logged that it lost the lease', 'yes'],
        ['exit codes on SIGTERM (A, B)', end.codes],
      ];
      expect(end.codes).toBe('0, 0');
    },
  );
}, 300_000);

it('18. a replica cut off from Postgres (the packets stop, the sockets stay open): its source moves on, its turn ends by its deadline or the fence', async () => {
  await measured(
    {
      item: 18,
      title: 'a replica cut off from Postgres',
      claim:
        'A replica whose Postgres connections stop carrying packets without closing (a partition, a hung node) ' +
        'loses its sources when their leases run out, and the other replicas take them over; its statement in ' +
        'flight fails at DATABASE_STATEMENT_TIMEOUT_MS (just under the lease), or, when the connections carry ' +
        'again first, arrives late with an old fencing token and commits nothing. Nothing is lost or stored twice.',
      method:
        `As item 17 (${SOURCES} accounts x ${EVENTS} events, SOURCE_LEASE_MS=${LEASE_MS}), but replica A reaches Postgres ` +
        'through a TCP proxy in the test (test/faults/support/stalling-proxy.ts). Once A holds a source in mid ' +
        `catch-up (B is started then), the proxy stops forwarding for ${OUTAGE_MS / 1000} s, holding the bytes, then forwards them late.`,
    },
    async (rec) => {
      rec.injectedWhat = 'cuts';
      const f = await fleet('cut_off');
      const pgUrl = new URL(TEST_DATABASE_URL);
      const proxy = await startStallingProxy({ host: pgUrl.hostname, port: Number(pgUrl.port || 5432) });
      try {
        const viaProxy = new URL(TEST_DATABASE_URL);
        viaProxy.port = String(proxy.port);
        const a = f.start('replica-a', { SYNC_CONCURRENCY: '1', DATABASE_URL: viaProxy.toString() });
        const held = await waitFor(() => f.heldMidway('replica-a'), {
          what: 'replica-a to hold a source mid catch-up',
          timeoutMs: 60_000,
        });
        proxy.stall();
        rec.injected++;
        const cutAt = performance.now();
        const b = f.start('replica-b', { SYNC_CONCURRENCY: '2' });
        const movedAfterMs = await takenOverAfter(f, held, cutAt);
        await sleep(Math.max(0, OUTAGE_MS - (performance.now() - cutAt)));
        proxy.resume();
        // Its statement's deadline (just under the lease) or the fencing token, whichever comes first, ends its turn.
        const deadlineLine = 'source failed: Query read timeout';
        const ended = await waitFor(
          () =>
            a.stdout().includes(leaseLostLine)
              ? 'lost the lease'
              : a.stdout().includes(deadlineLine)
                ? 'its statement passed its deadline'
                : null,
          { what: 'replica-a to say its turn ended', timeoutMs: 60_000 },
        );
        const end = await f.finish([a, b]);
        rec.checked = end.checked;
        rec.lost = end.lost;
        rec.duplicated = end.duplicated;
        rec.figures = [
          ['accounts x events', `${SOURCES} x ${EVENTS}`],
          ['SOURCE_LEASE_MS / SYNC_INTERVAL_MS', `${LEASE_MS} / ${INTERVAL_MS}`],
          ['source cut off, cursor at the cut', held.cursor],
          ['time from the cut until another replica moved the source on', `${movedAfterMs} ms`],
          ['how A said its turn ended', ended],
          ['exit codes on SIGTERM (A, B)', end.codes],
        ];
        expect(end.codes).toBe('0, 0');
      } finally {
        await proxy.close();
      }
    },
  );
}, 300_000);
