import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ServiceClient } from '../../src/api/client.js';
import type { Simulator } from '../../src/simulator/index.js';
import { CLI, killChildren, spawnNode } from '../support/processes.js';
import { startTestSimulator, TEST_API_KEY } from '../support/simulator.js';
import { fateOf } from './support/fate.js';
import { measured } from './support/results.js';
import { useSandboxes } from './support/sandbox.js';
import { readWholeFeed } from './support/served.js';

const LOCKLESS = fileURLToPath(new URL('./children/lockless-worker.mjs', import.meta.url));
const ROUNDS = 3;
const sandbox = useSandboxes();
let locked: Simulator;
let lockless: Simulator;

beforeAll(async () => {
  locked = await startTestSimulator({ backlog: 5_000, faults: { latencyMs: 2 } });
  lockless = await startTestSimulator({ backlog: 5_000, faults: { latencyMs: 2 } });
});
afterAll(async () => {
  await killChildren();
  await locked.close();
  await lockless.close();
});

/** New mail between rounds, so that each round has something to race for. */
async function sendSome(sim: Simulator, round: number): Promise<void> {
  const client = new ServiceClient({ baseUrl: sim.baseUrl, apiKey: TEST_API_KEY });
  for (let i = 0; i < 20; i++) {
    await client.sendEmail({
      from: 'app@example.com',
      to: [`${['delivered', 'bounced', 'complained', 'failed'][i % 4]}+r${round}i${i}@example.com`],
      subject: `round ${round}`,
      html: '<p>x</p>',
    });
  }
  await client.close();
  sim.emitContactEvent('contact.subscribed', `r${round}@example.com`);
}

/** The `status` of the "sync run finished" line a CLI run logs at info. */
function statusOf(stdout: string): string {
  for (const line of stdout.split('\n')) {
    if (line.includes('"sync run finished"')) return (JSON.parse(line) as { status: string }).status;
  }
  return 'none';
}

it('2. two and three workers (processes) on one source at once: exactly once', async () => {
  await measured(
    {
      item: 2,
      title: 'two and three workers at once',
      claim:
        'Several workers on the same source store and enqueue every event exactly once: the source lock keeps ' +
        'all but one idle, and where the lock does not hold, the compare-and-set of the cursor keeps the data right.',
      method:
        `Two, then three \`feedsync sync --once\` processes started together on one source, ${ROUNDS} rounds each ` +
        'with new mail sent between rounds (5,000 backlog events plus about 40 per round). Then the same with two ' +
        'and three processes of a worker that never takes the lock (test/faults/children/lockless-worker.mjs: the ' +
        "real feed client, applier and relay, started over from the stored cursor whenever another one's commit won).",
    },
    async (rec) => {
      rec.injectedWhat = 'racing processes';
      const statuses: Record<string, number> = {};
      let lockedChecked = 0;
      let lost = 0;
      let duplicated = 0;
      for (const workers of [2, 3]) {
        const box = await sandbox(`locked_${workers}`);
        for (let round = 0; round < ROUNDS; round++) {
          await sendSome(locked, workers * 10 + round);
          const env = box.env(locked.baseUrl, { LOG_LEVEL: 'info' });
          const runs = Array.from({ length: workers }, () => spawnNode([CLI, 'sync', '--once'], env));
          const results = await Promise.all(runs.map((r) => r.waitExit(120_000)));
          rec.injected += workers;
          for (const r of results) {
            expect(r.code, r.stderr).toBe(0);
            const status = statusOf(r.stdout);
            statuses[status] = (statuses[status] ?? 0) + 1;
          }
          const fate = await fateOf(box, await readWholeFeed(locked.baseUrl, TEST_API_KEY));
          expect(fate).toMatchObject({ lost: 0, duplicated: 0, strangers: 0, unpublished: 0 });
          if (round === ROUNDS - 1) {
            lockedChecked += fate.served;
            lost += fate.lost;
            duplicated += fate.duplicated;
          }
        }
      }

      let conflicts = 0;
      let racedDuplicates = 0;
      let locklessChecked = 0;
      for (const workers of [2, 3]) {
        const box = await sandbox(`lockless_${workers}`);
        const runs = Array.from({ length: workers }, () =>
          spawnNode([LOCKLESS], box.env(lockless.baseUrl, { FEED_PAGE_LIMIT: '50' })),
        );
        const results = await Promise.all(runs.map((r) => r.waitExit(120_000)));
        rec.injected += workers;
        for (const r of results) {
          expect(r.code, r.stderr).toBe(0);
          const totals = JSON.parse(r.stdout) as { conflicts: number; duplicates: number };
          conflicts += totals.conflicts;
          racedDuplicates += totals.duplicates;
        }
        const fate = await fateOf(box, await readWholeFeed(lockless.baseUrl, TEST_API_KEY));
        locklessChecked += fate.served;
        lost += fate.lost;
        duplicated += fate.duplicated;
        expect(fate).toMatchObject({ lost: 0, duplicated: 0, strangers: 0, unpublished: 0 });
      }

      rec.checked = lockedChecked + locklessChecked;
      rec.lost = lost;
      rec.duplicated = duplicated;
      rec.figures = [
        [
          'runs with the lease: caught up / found it taken',
          `${statuses['caught-up'] ?? 0} / ${statuses.locked ?? 0}`,
        ],
        ['events checked with the lease (2 and 3 workers)', lockedChecked],
        ['events checked without the lease (2 and 3 workers)', locklessChecked],
        ['commits lost to another worker’s compare-and-set, without the lease', conflicts],
        [
          'events a worker without the lease fetched that another had stored (counted as duplicates, not stored)',
          racedDuplicates,
        ],
      ];
      expect(statuses.none ?? 0).toBe(0);
      expect(conflicts).toBeGreaterThan(0);
    },
  );
});
