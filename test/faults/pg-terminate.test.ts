import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { backlogEvent } from '../../src/simulator/backlog.js';
import type { Simulator } from '../../src/simulator/index.js';
import { createStore, type Store } from '../../src/store/db.js';
import { createSync } from '../../src/sync/sync.js';
import { TEST_DATABASE_URL } from '../support/postgres.js';
import { between, seeded } from '../support/random.js';
import { startTestSimulator, TEST_API_KEY } from '../support/simulator.js';
import { followAdds } from './support/add-counter.js';
import { fateOf } from './support/fate.js';
import { isPrefix, prefixState } from './support/prefix-check.js';
import { measured } from './support/results.js';
import { useSandboxes } from './support/sandbox.js';
import { readWholeFeed, routed } from './support/served.js';

const SEED = 0x5eed03;
const APPLIER_EVENTS = 30_000;
const RELAY_EVENTS = 10_000;
const BLOCKED_ROUNDS = 8;
const TIMED_ROUNDS = 12;
const RELAY_KILLS = 6;
const PAGE = 100;
const sandbox = useSandboxes();
const logger = createLogger({ level: 'silent' });
let simA: Simulator;
let simB: Simulator;
let admin: pg.Client;

beforeAll(async () => {
  simA = await startTestSimulator({ backlog: APPLIER_EVENTS });
  simB = await startTestSimulator({ backlog: RELAY_EVENTS });
  admin = new pg.Client({ connectionString: TEST_DATABASE_URL, application_name: 'feedsync-faults-admin' });
  await admin.connect();
});
afterAll(async () => {
  await admin.end();
  await simA.close();
  await simB.close();
});

/** Polls for a row of `sql` until one comes or `done` says the run is over; bounded by the run. */
async function findBackend(sql: string, values: unknown[], done: () => boolean) {
  while (!done()) {
    const { rows } = await admin.query<{ pid: number; wrote: boolean }>(sql, values);
    if (rows[0]) return rows[0];
    await sleep(1);
  }
  return null;
}

async function terminate(pid: number): Promise<boolean> {
  const { rows } = await admin.query<{ ok: boolean }>('SELECT pg_terminate_backend($1) AS ok', [pid]);
  return rows[0]?.ok === true;
}

/** A store whose sessions carry `name`, so that pg_stat_activity tells them apart. */
function namedStore(schema: string, name: string): Store {
  return createStore({ url: TEST_DATABASE_URL, schema, applicationName: name });
}

it('3. pg_terminate_backend mid-transaction: rollback, reconnect, no partial page', async () => {
  await measured(
    {
      item: 3,
      title: 'pg_terminate_backend mid-transaction',
      claim:
        "Killing the worker's Postgres session in the middle of a transaction rolls the whole batch back: " +
        'the next run reconnects and goes on, and no transaction is ever kept in part.',
      method:
        `A sync (createSync, in process) over ${APPLIER_EVENTS} events, pages of ${PAGE}. ${BLOCKED_ROUNDS} times, a second ` +
        "session holds a lock on the email_status row of an event some pages ahead, so the applier's statement stops " +
        'there after inserting its events; its session is then terminated. ' +
        `${TIMED_ROUNDS} more times the running applier statement is terminated at a seeded random moment. Then, on a ` +
        `second source of ${RELAY_EVENTS} events, the relay's Postgres session (reading the outbox, checking or marking ` +
        `rows, before or after their jobs were added) is terminated ${RELAY_KILLS} times. After every termination the store is checked: events stored are exactly 1..cursor, each with its outbox row.`,
    },
    async (rec) => {
      rec.injectedWhat = 'terminated sessions';
      const random = seeded(SEED);
      const boxA = await sandbox('terminate_applier');
      const appA = `faults-apply-${boxA.schema}`;
      const storeA = namedStore(boxA.schema, appA);
      const syncA = createSync(boxA.config(simA.baseUrl), { logger, store: storeA });
      let withWrites = 0;
      let failedRuns = 0;
      let finishedRuns = 0;
      let checks = 0;
      let notPrefix = 0;
      // No page alignment here: a run after a failed one reads first from the event before
      // its cursor (src/sync/cursor-check.ts) and gives that one back, so its pages lie one
      // event off the feed's hundreds. What a rolled-back transaction must leave is a prefix
      // (events exactly 1..cursor) with one outbox row for each event.
      const check = async () => {
        const state = await prefixState(boxA.store, PAGE);
        checks++;
        if (!isPrefix(state) || state.outboxRows !== state.stored) notPrefix++;
        return state;
      };
      const blocker = new pg.Client({ connectionString: TEST_DATABASE_URL });
      await blocker.connect();
      const blockerPid = (await blocker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!
        .pid;
      try {
        for (let round = 0; round < BLOCKED_ROUNDS + TIMED_ROUNDS; round++) {
          const before = await check();
          const blocked = round < BLOCKED_ROUNDS;
          if (blocked) {
            const target = before.cursor + between(random, 1, 2_000);
            const emailId = backlogEvent(target, 'x', 0).data.email_id as string;
            await blocker.query('BEGIN');
            await blocker.query(
              `INSERT INTO "${boxA.schema}".email_status (source, email_id, status, last_event_id, last_event_at)
               VALUES ('default', $1, 'sent', 'blocker', now())
               ON CONFLICT (source, email_id) DO UPDATE SET updated_at = now()`,
              [emailId],
            );
          }
          let over = false;
          const run = syncA.runOnce().then(
            () => 'finished',
            () => 'failed',
          );
          void run.finally(() => (over = true));
          if (!blocked) await sleep(between(random, 0, 60));
          // Terminate until the run fails: a termination that lands between two statements
          // kills an idle pooled session instead (reconnected at once) and the run goes on.
          // Bounded by the run: it ends by failing or by reaching the end of the feed.
          while (!over) {
            const victim = await findBackend(
              blocked
                ? `SELECT pid, backend_xid IS NOT NULL AS wrote FROM pg_stat_activity
                    WHERE application_name = $1 AND $2 = ANY(pg_blocking_pids(pid))`
                : `SELECT pid, backend_xid IS NOT NULL AS wrote FROM pg_stat_activity
                    WHERE application_name = $1 AND state = 'active' AND query LIKE '%WITH input AS%'`,
              blocked ? [appA, blockerPid] : [appA],
              () => over,
            );
            if (!victim) break;
            if (await terminate(victim.pid)) {
              rec.injected++;
              if (victim.wrote) withWrites++;
            }
            if (blocked) break;
            await Promise.race([run, sleep(20)]);
          }
          if (blocked) await blocker.query('ROLLBACK');
          if ((await run) === 'failed') failedRuns++;
          else finishedRuns++;
          await check();
        }
        const last = await syncA.runOnce();
        expect(last).toMatchObject({ status: 'caught-up', drained: true });
      } finally {
        await blocker.end();
        await syncA.close();
        await storeA.close();
      }
      const final = await check();
      const servedA = await readWholeFeed(simA.baseUrl, TEST_API_KEY);
      const fateA = await fateOf(boxA, servedA);

      // The relay: it holds no transaction while it adds jobs, so its sessions are terminated
      // whenever they last ran one of its statements: mid-statement, or between its add and its mark.
      const boxB = await sandbox('terminate_relay');
      const appB = `faults-relay-${boxB.schema}`;
      const storeB = namedStore(boxB.schema, appB);
      const adds = await followAdds(boxB);
      const syncB = createSync(boxB.config(simB.baseUrl), { logger, store: storeB });
      let relayKills = 0;
      try {
        // Bounded: each run either ends or loses one more transaction; at most RELAY_KILLS + 3 runs.
        for (let i = 0; i < RELAY_KILLS + 3 && relayKills < RELAY_KILLS; i++) {
          let over = false;
          const run = syncB.runOnce().catch(() => null);
          void run.finally(() => (over = true));
          while (relayKills < RELAY_KILLS) {
            const victim = await findBackend(
              `SELECT pid, backend_xid IS NOT NULL AS wrote FROM pg_stat_activity
                WHERE application_name = $1 AND query LIKE '/* relay: %'`,
              [appB],
              () => over,
            );
            if (!victim) break;
            if (await terminate(victim.pid)) relayKills++;
          }
          await run;
        }
        const last = await syncB.runOnce();
        expect(last).toMatchObject({ status: 'caught-up', drained: true });
      } finally {
        await syncB.close();
        await storeB.close();
      }
      const counts = await adds.stop();
      const servedB = await readWholeFeed(simB.baseUrl, TEST_API_KEY);
      const fateB = await fateOf(boxB, servedB);
      const addedTwice = routed(servedB).filter((e) => (counts.added.get(`default/${e.id}`) ?? 0) > 1).length;
      rec.injected += relayKills;

      rec.checked = fateA.served + fateB.served;
      rec.lost = fateA.lost + fateB.lost;
      rec.duplicated = fateA.duplicated + fateB.duplicated + addedTwice;
      rec.figures = [
        [
          'applier sessions terminated while blocked on a lock / at a random moment',
          `${BLOCKED_ROUNDS} / ${rec.injected - relayKills - BLOCKED_ROUNDS}`,
        ],
        ['of them seen with uncommitted rows written (a transaction id assigned)', withWrites],
        ['runs that failed on a terminated session and were run again', failedRuns],
        ['runs that reached the end of the feed despite a termination between statements', finishedRuns],
        ['relay sessions terminated (mid-statement or between add and mark)', relayKills],
        ['relay re-adds BullMQ ignored (same jobId)', counts.ignored],
        ['store checks after a termination', checks],
        ['checks where stored events were not exactly 1..cursor, each with its outbox row', notPrefix],
        ['events stored (applier source, relay source)', `${fateA.stored}, ${fateB.stored}`],
      ];

      expect(failedRuns).toBe(BLOCKED_ROUNDS + TIMED_ROUNDS);
      expect(withWrites).toBeGreaterThanOrEqual(BLOCKED_ROUNDS);
      expect(relayKills).toBe(RELAY_KILLS);
      expect(notPrefix).toBe(0);
      expect(final).toMatchObject({ stored: APPLIER_EVENTS, cursor: APPLIER_EVENTS });
      for (const fate of [fateA, fateB]) {
        expect(fate).toMatchObject({ lost: 0, duplicated: 0, strangers: 0, unpublished: 0 });
      }
      expect(addedTwice).toBe(0);
    },
  );
});
