import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { planWorker } from '../../src/compose/plan-worker.js';
import { createLogger } from '../../src/logger.js';
import { claimDue } from '../../src/store/lease.js';
import { ensureLeaseRows } from '../../src/store/lease-statements.js';
import { watchSources } from '../../src/sync/scheduler.js';
import { Worker } from '../../src/sync/worker.js';
import { CLI, killChildren, runCli, spawnNode, waitFor } from '../support/processes.js';
import { TEST_API_KEY } from '../support/simulator.js';
import { fateOfFeed, simulators } from './support/fed-by-simulator.js';
import { sendMail } from './support/mail.js';
import { isPrefix, prefixState } from './support/prefix-check.js';
import { type PrivatePostgres, startPrivatePostgres } from './support/private-postgres.js';
import { measured } from './support/results.js';
import { type Sandbox, useSandboxes } from './support/sandbox.js';
import { readWholeFeed } from './support/served.js';

const sandbox = useSandboxes();
const INTERVAL_MS = 100;
let postgres: PrivatePostgres;
const sims = simulators();

beforeAll(async () => {
  postgres = await startPrivatePostgres();
});
afterAll(async () => {
  await killChildren();
  await sims.closeAll();
  await postgres?.dispose();
});

const simulator = sims.start;
const fate = fateOfFeed;

async function cursorOf(box: Sandbox): Promise<string | null> {
  const { rows } = await box.store.pool.query<{ after_id: string | null }>(
    `SELECT after_id FROM "${box.schema}".cursors WHERE source = 'default'`,
  );
  return rows[0]?.after_id ?? null;
}

it('4. Postgres stopped: a once run exits 1 with the cursor intact; a watch run backs off and catches up', async () => {
  await measured(
    {
      item: 4,
      title: 'Postgres stopped',
      claim:
        'With Postgres gone, a once run fails (exit 1) and moves nothing; a watch run backs off, doubling its wait, ' +
        'and catches up once Postgres is back. Nothing is lost or stored twice.',
      method:
        'A private Postgres cluster (initdb and pg_ctl, on its own port) that the test stops and starts. ' +
        '(a) `feedsync sync --once` run while it is stopped; ' +
        '(b) the cluster crashed (`pg_ctl stop -m immediate`) in the middle of a 20,000-event catch-up, then restarted ' +
        "and the run repeated once the crashed run's lease (SOURCE_LEASE_MS=1000) ran out; (c) the watch loop (src/sync/scheduler.ts, interval 100 ms, leases of 3 s) kept running while the cluster " +
        'was stopped for a few seconds and new mail arrived.',
    },
    async (rec) => {
      rec.injectedWhat = 'Postgres outages';
      // (a) stopped before the run.
      const simA = await simulator(3_000);
      const boxA = await sandbox('pg_down_once', { databaseUrl: postgres.url });
      const first = await runCli(['sync', '--once'], boxA.env(simA.baseUrl), 60_000);
      expect(first.code, first.stderr).toBe(0);
      const cursorBefore = await cursorOf(boxA);
      await sendMail(simA, 'while-down');
      await postgres.stop('fast');
      rec.injected++;
      const started = performance.now();
      const down = await runCli(['sync', '--once'], boxA.env(simA.baseUrl), 60_000);
      const failMs = Math.round(performance.now() - started);
      await postgres.start();
      const cursorAfter = await cursorOf(boxA);
      const stateA = await prefixState(boxA.store, 100);
      expect(down.code).toBe(1);
      expect(down.stderr).toMatch(/ECONNREFUSED|connect/);
      expect(cursorAfter).toBe(cursorBefore);
      expect(stateA.stored).toBe(3_000);
      const again = await runCli(['sync', '--once'], boxA.env(simA.baseUrl), 60_000);
      expect(again.code, again.stderr).toBe(0);
      const fateA = await fate(boxA, simA);

      // (b) crashed in the middle of a catch-up.
      // 20 ms a page: the run lasts seconds, so the crash lands in the middle of it.
      const simB = await simulator(20_000, 20);
      const boxB = await sandbox('pg_crash_run', { databaseUrl: postgres.url });
      // The crashed run cannot give its lease back: it runs out this soon after, before the run is repeated.
      const envB = boxB.env(simB.baseUrl, { SOURCE_LEASE_MS: '1000' });
      const child = spawnNode([CLI, 'sync', '--once'], envB);
      await waitFor(async () => (await prefixState(boxB.store, 100)).stored >= 3_000, {
        timeoutMs: 60_000,
        what: '3000 events stored',
      });
      await postgres.stop('immediate');
      rec.injected++;
      const crashed = await child.waitExit(60_000);
      await postgres.start();
      const stateB = await waitFor(() => prefixState(boxB.store, 100).catch(() => null), {
        timeoutMs: 30_000,
        what: 'Postgres back after the crash',
      });
      expect(crashed.code).toBe(1);
      expect(isPrefix(stateB)).toBe(true);
      expect(stateB.partialPages).toBe(0);
      await waitFor(
        async () =>
          (
            await boxB.store.pool.query(
              `SELECT FROM "${boxB.schema}".leases WHERE holder IS NOT NULL AND expires_at > now()`,
            )
          ).rows.length === 0,
        { timeoutMs: 10_000, what: "the crashed run's lease to run out" },
      );
      const resumed = await runCli(['sync', '--once'], envB, 120_000);
      expect(resumed.code, resumed.stderr).toBe(0);
      const fateB = await fate(boxB, simB);

      // (c) the watch loop through an outage.
      const simC = await simulator(2_000);
      const boxC = await sandbox('pg_down_watch', { databaseUrl: postgres.url });
      // A worker's own turns of the one source, under the leases this loop claims.
      const worker = new Worker(
        planWorker(boxC.config(simC.baseUrl), {
          mode: 'once',
          sources: ['default'],
          logger: createLogger({ level: 'silent' }),
        }),
      );
      const waits: number[] = [];
      const runs: string[] = [];
      const stop = new AbortController();
      const lease = { holder: 'pg-down-test/1', leaseMs: 3_000 };
      await ensureLeaseRows(worker.parts.store, ['default']);
      const loop = watchSources({
        concurrency: 1,
        intervalMs: INTERVAL_MS,
        signal: stop.signal,
        logger: createLogger({ level: 'silent' }),
        describe: String,
        claim: (limit) => claimDue(worker.parts.store, limit, lease),
        turn: (held, signal) => worker.syncOf('default').runHeld(held, signal),
        onOutcome: (o) => runs.push(o.ok ? o.result.status : 'failed'),
        // The claims fail while Postgres is down: the loop's own back-off.
        onClaimFailure: (_err, ms) => waits.push(ms),
      });
      let outageMs = 0;
      let failuresSeen = 0;
      try {
        await waitFor(() => runs.includes('caught-up'), { timeoutMs: 60_000, what: 'the first watch run' });
        await sendMail(simC, 'watch-outage');
        const waitsBefore = waits.length;
        await postgres.stop('fast');
        rec.injected++;
        const downAt = performance.now();
        // Down long enough for several failed claims and growing waits.
        await waitFor(() => waits.slice(waitsBefore).filter((w) => w > INTERVAL_MS).length >= 3, {
          timeoutMs: 30_000,
          what: 'three backed-off waits',
        });
        await sleep(500);
        await postgres.start();
        outageMs = Math.round(performance.now() - downAt);
        failuresSeen = waits.slice(waitsBefore).filter((w) => w > INTERVAL_MS).length + 1;
        const total = (await readWholeFeed(simC.baseUrl, TEST_API_KEY)).length;
        await waitFor(
          async () => {
            const f = await fate(boxC, simC).catch(() => null);
            return f !== null && f.stored === total && f.unpublished === 0 && f.lost === 0;
          },
          { timeoutMs: 90_000, intervalMs: 200, what: 'the watch loop to catch up after the outage' },
        );
      } finally {
        stop.abort();
        await loop;
        await worker.close();
      }
      const fateC = await fate(boxC, simC);
      const backoff = waits.filter((w) => w > INTERVAL_MS);

      rec.checked = fateA.served + fateB.served + fateC.served;
      rec.lost = fateA.lost + fateB.lost + fateC.lost;
      rec.duplicated = fateA.duplicated + fateB.duplicated + fateC.duplicated;
      rec.figures = [
        ['(a) exit code of the once run with Postgres stopped', down.code ?? 'signal'],
        ['(a) time until it gave up', `${failMs} ms`],
        ['(a) cursor before / after the failed run', `${cursorBefore} / ${cursorAfter}`],
        ['(b) exit code of the run whose Postgres crashed', crashed.code ?? 'signal'],
        ['(b) events stored when it crashed (all whole pages, exactly 1..cursor)', stateB.stored],
        ['(c) watch claims that failed while Postgres was down', failuresSeen],
        ['(c) waits after failures, ms (interval 100, doubling, at most 10 intervals)', backoff.join(', ')],
        ['(c) outage', `${outageMs} ms`],
        ['events stored in all (a, b, c)', `${fateA.stored}, ${fateB.stored}, ${fateC.stored}`],
      ];

      for (const f of [fateA, fateB, fateC]) {
        expect(f).toMatchObject({ lost: 0, duplicated: 0, strangers: 0, unpublished: 0 });
      }
      expect(backoff.length).toBeGreaterThanOrEqual(3);
      for (let i = 1; i < Math.min(backoff.length, 4); i++) {
        expect(backoff[i]).toBe(Math.min(INTERVAL_MS * 10, backoff[i - 1]! * 2));
      }
    },
  );
});
