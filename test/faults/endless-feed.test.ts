import { afterAll, expect, it } from 'vitest';
import { backlogType } from '../../src/simulator/backlog.js';
import type { Simulator } from '../../src/simulator/index.js';
import { killChildren } from '../support/processes.js';
import { startTestSimulator } from '../support/simulator.js';
import { fateOf } from './support/fate.js';
import { isPrefix, prefixState } from './support/prefix-check.js';
import { measured } from './support/results.js';
import { useSandboxes } from './support/sandbox.js';
import { QUEUES_IN } from './support/sandbox-queues.js';
import { timedCli } from './support/timed-cli.js';

/** As good as endless: each run of a few seconds reads a small part of it. */
const BACKLOG = 1_000_000_000;
const LIMIT_MS = 4_000;
const sandbox = useSandboxes();
let sim: Simulator | undefined;
afterAll(async () => {
  await killChildren();
  await sim?.close();
});

it('36. a feed that never ends: a once run stops at SYNC_ONCE_MAX_MS, exit 4, and the next run goes on', async () => {
  await measured(
    {
      item: 29,
      title: 'a feed that never ends',
      claim:
        '`sync --once` against a feed that always has another full page stops on its own after SYNC_ONCE_MAX_MS: ' +
        'the pages it fetched commit and are enqueued, it says it is not caught up (a log line and one line on ' +
        'stderr) and exits 4; the next run goes on from the cursor. Nothing is lost or stored twice.',
      method:
        `The simulator with a synthetic backlog of ${BACKLOG.toLocaleString('en-US')} events (generated on the fly), ` +
        `SYNC_ONCE_MAX_MS=${LIMIT_MS}; two \`feedsync sync --once\` runs through the CLI, then the events 1..cursor ` +
        `compared with the store and the jobs in ${QUEUES_IN}.`,
    },
    async (rec) => {
      rec.injectedWhat = 'runs against a feed without end';
      sim = await startTestSimulator({ backlog: BACKLOG });
      const box = await sandbox('endless_feed');
      const env = box.env(sim.baseUrl, { SYNC_ONCE_MAX_MS: String(LIMIT_MS), LOG_LEVEL: 'info' });
      const first = await timedCli(['sync', '--once'], env, 120_000);
      rec.injected++;
      const afterFirst = await prefixState(box.store, 100);
      const second = await timedCli(['sync', '--once'], env, 120_000);
      rec.injected++;
      const afterSecond = await prefixState(box.store, 100);
      const { rows } = await box.store.pool.query<{ last_success_at: Date | null }>(
        `SELECT last_success_at FROM "${box.schema}".cursors WHERE source = 'default'`,
      );

      const served = Array.from({ length: afterSecond.cursor }, (_, i) => ({
        id: `evt_${String(i + 1).padStart(12, '0')}`,
        type: backlogType(i + 1),
      }));
      const fate = await fateOf(box, served);
      rec.checked = fate.served;
      rec.lost = fate.lost;
      rec.duplicated = fate.duplicated;
      rec.figures = [
        [
          'first run: exit / wall time incl. start-up / events stored',
          `${first.code} / ${first.ms} ms / ${afterFirst.stored}`,
        ],
        [
          'second run: exit / wall time / events stored in all',
          `${second.code} / ${second.ms} ms / ${afterSecond.stored}`,
        ],
        ['cursor after each run (position in the feed)', `${afterFirst.cursor} → ${afterSecond.cursor}`],
        [
          'stored events past the cursor, pages stored in part',
          `${fate.strangers}, ${afterSecond.partialPages}`,
        ],
        ['jobs in BullMQ / outbox rows not published', `${fate.jobs} / ${fate.unpublished}`],
        ['last_success_at set', rows[0]?.last_success_at ? 'yes' : 'no'],
      ];

      for (const run of [first, second]) {
        expect(run.code, run.stderr).toBe(4);
        // The limit, plus a node start and the last commit and drain on a shared machine.
        expect(run.ms).toBeLessThan(LIMIT_MS + 30_000);
        expect(run.stderr.trim().split('\n')).toHaveLength(1);
        expect(run.stderr).toContain(
          `feedsync: not caught up: the run stopped at SYNC_ONCE_MAX_MS (${LIMIT_MS} ms)`,
        );
        expect(run.stdout).toContain('source not caught up');
        expect(run.stdout).toContain('"not_caught_up":1');
      }
      expect(afterFirst.cursor).toBeGreaterThan(0);
      expect(afterSecond.cursor).toBeGreaterThan(afterFirst.cursor);
      expect(isPrefix(afterFirst)).toBe(true);
      expect(isPrefix(afterSecond)).toBe(true);
      expect(rows[0]?.last_success_at ?? null).toBeNull();
      expect(fate).toMatchObject({ lost: 0, duplicated: 0, strangers: 0, unpublished: 0 });
    },
  );
}, 300_000);
