import { afterAll, expect, it } from 'vitest';
import type { ServiceEvent } from '../../src/api/types.js';
import { killChildren, runCli } from '../support/processes.js';
import { TEST_QUEUE_BACKEND } from '../support/queues.js';
import { fateOf, queuedJobIds } from './support/fate.js';
import { feedEvents, startFeedServer } from './support/feed-server.js';
import { measured } from './support/results.js';
import { useSandboxes } from './support/sandbox.js';
import { loseJobs } from './support/sandbox-queues.js';

const sandbox = useSandboxes();
afterAll(async () => {
  await killChildren();
});

const COUNT = 3_000;
/** What loses the jobs on this run's queues, how, and the fault's name. */
const [LOSER, LOSS, LOST] =
  TEST_QUEUE_BACKEND === 'postgres'
    ? [
        "the queues' schema",
        "every table of the queues' schema but BullMQ's migration ledger emptied (the jobs lost)",
        'emptied queues',
      ]
    : ['Redis', 'the queue prefix deleted (Redis lost its data)', 'prefix deletions'];
/** Events dated long before the retention, and the two dates a feed might send to blind it. */
function oldFeed(): ServiceEvent[] {
  const events = feedEvents(COUNT);
  events.push(
    {
      id: 'ev_1969',
      type: 'email.bounced',
      created_at: '1969-07-20T20:17:40Z',
      data: { email_id: 'em_1969' },
    },
    {
      id: 'ev_9999',
      type: 'email.complained',
      created_at: '9999-12-31T23:59:59Z',
      data: { email_id: 'em_9999' },
    },
  );
  return events;
}

it('25. events older than the retention when they arrive: requeue, a second read and pruning', async () => {
  await measured(
    {
      item: 25,
      title: 'events older than the retention when they arrive',
      claim:
        'A catch-up of events already older than `EVENTS_RETENTION_DAYS` keeps them (by arrival) long enough that ' +
        `\`requeue\` after ${LOSER} lost its data re-drives every job, its dry run counting the same; the feed serving ` +
        'them again stores and enqueues nothing new; once their time is over every one of them is pruned, dates ' +
        'before 1970 and in 9999 included.',
      method:
        `A feed server of ${COUNT.toLocaleString('en-US')} events dated 2024 plus one dated 1969 and one dated 9999, ` +
        `\`feedsync sync --once\` with \`EVENTS_RETENTION_DAYS=7\`; ${LOSS}; ` +
        '`requeue --since 1h --dry-run`, then `requeue --since 1h`; `cursor reset` and `sync --once` (the feed ' +
        'served again); the arrival and publish times moved 8 days back, and `sync --once` again.',
    },
    async (rec) => {
      rec.injectedWhat = `${LOST} and replays`;
      const served = oldFeed();
      const feed = await startFeedServer(served);
      const box = await sandbox('retention_old');
      const env = box.env(feed.baseUrl, { EVENTS_RETENTION_DAYS: '7' });
      const fate = () => fateOf(box, served);
      try {
        const first = await runCli(['sync', '--once'], env, 120_000);
        expect(first.code, first.stderr).toBe(0);
        const afterRun = await fate();

        await loseJobs(box);
        rec.injected++;
        const left = (await queuedJobIds(box)).length;
        const dry = await runCli(['requeue', '--since', '1h', '--dry-run', '--json'], env, 60_000);
        const real = await runCli(['requeue', '--since', '1h', '--json'], env, 60_000);
        const dryResult = JSON.parse(dry.stdout) as { requeued: number; unavailable: number };
        const realResult = JSON.parse(real.stdout) as {
          requeued: number;
          unavailable: number;
          added: number;
        };
        const afterRequeue = await fate();

        const reset = await runCli(['cursor', 'reset'], env, 60_000);
        expect(reset.code, reset.stderr).toBe(0);
        const again = await runCli(['sync', '--once'], env, 120_000);
        rec.injected++;
        expect(again.code, again.stderr).toBe(0);
        const afterReplay = await fate();

        const s = `"${box.schema}"`;
        await box.store.pool.query(`UPDATE ${s}.events SET received_at = received_at - interval '8 days'`);
        await box.store.pool.query(
          `UPDATE ${s}.outbox SET created_at = created_at - interval '8 days', published_at = published_at - interval '8 days'`,
        );
        const aged = await runCli(['sync', '--once'], env, 120_000);
        expect(aged.code, aged.stderr).toBe(0);
        const { rows } = await box.store.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM ${s}.events`,
        );

        rec.checked = served.length;
        rec.lost = Math.max(afterRun.lost, afterRequeue.lost, afterReplay.lost);
        rec.duplicated = afterRun.duplicated + afterRequeue.duplicated + afterReplay.duplicated;
        rec.figures = [
          [
            `jobs left after the ${TEST_QUEUE_BACKEND === 'postgres' ? 'queues were emptied' : 'prefix was deleted'}`,
            left,
          ],
          [
            'requeue --dry-run: would re-drive / cannot (event gone)',
            `${dryResult.requeued} / ${dryResult.unavailable}`,
          ],
          [
            'requeue: re-drove / jobs added / cannot (event gone), exit code',
            `${realResult.requeued} / ${realResult.added} / ${realResult.unavailable}, ${real.code}`,
          ],
          ['jobs after the requeue', afterRequeue.jobs],
          [
            'outbox rows and jobs after the feed served every event again',
            `${afterReplay.outboxRows} / ${afterReplay.jobs}`,
          ],
          ['events left 8 days later (1969 and 9999 included), of', `${rows[0]!.n} / ${served.length}`],
        ];
        expect(afterRun).toMatchObject({ lost: 0, duplicated: 0, stored: served.length });
        expect(left).toBe(0);
        expect(dry.code).toBe(0);
        expect(real.code).toBe(0);
        expect(dryResult).toMatchObject({ requeued: served.length, unavailable: 0 });
        expect(realResult).toMatchObject({ requeued: served.length, unavailable: 0, added: served.length });
        expect(afterRequeue).toMatchObject({ lost: 0, duplicated: 0, jobs: served.length });
        expect(afterReplay).toMatchObject({
          lost: 0,
          duplicated: 0,
          outboxRows: served.length,
          jobs: served.length,
        });
        expect(rows[0]!.n).toBe(0);
      } finally {
        await feed.close();
      }
    },
  );
});
