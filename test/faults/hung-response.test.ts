import { afterAll, beforeAll, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import type { Simulator } from '../../src/simulator/index.js';
import { createSync } from '../../src/sync/sync.js';
import { runCli } from '../support/processes.js';
import { startTestSimulator, TEST_API_KEY } from '../support/simulator.js';
import { fateOf } from './support/fate.js';
import { type FeedServer, feedEvents, startFeedServer } from './support/feed-server.js';
import { sendMail } from './support/mail.js';
import { measured } from './support/results.js';
import { type Sandbox, useSandboxes } from './support/sandbox.js';
import { readWholeFeed } from './support/served.js';

const TIMEOUT_MS = 300;
const RETRIES = 2;
const sandbox = useSandboxes();
const logger = createLogger({ level: 'silent' });
const EVENTS = feedEvents(500);
let sim: Simulator;
let feed: FeedServer;

beforeAll(async () => {
  sim = await startTestSimulator({ backlog: 1_000 });
  feed = await startFeedServer(EVENTS);
});
afterAll(async () => {
  await feed.close();
  await sim.close();
});

/** One in-process run with a short body timeout; the retry waits are skipped, the timeouts are real. */
async function run(box: Sandbox, baseUrl: string) {
  const attempts: number[] = [];
  const config = box.config(baseUrl, {
    FEED_TIMEOUT_MS: String(TIMEOUT_MS),
    FEED_MAX_RETRIES: String(RETRIES),
  });
  const sync = createSync(config, {
    logger,
    store: box.store,
    hooks: {
      onFeedResponse: ({ status, seconds }) => {
        if (status === 0) attempts.push(Math.round(seconds * 1000));
      },
    },
    retryDeps: { sleep: async () => {} },
  });
  try {
    const result = await sync.runOnce().catch((err: { code?: string }) => err);
    return { result, attempts };
  } finally {
    await sync.close();
  }
}

async function cursorOf(box: Sandbox): Promise<string | null> {
  const { rows } = await box.store.pool.query<{ after_id: string | null }>(
    `SELECT after_id FROM "${box.schema}".cursors`,
  );
  return rows[0]?.after_id ?? null;
}

it('7. a hung response (headers sent, body never finished): aborted at the body timeout, cursor unchanged', async () => {
  await measured(
    {
      item: 7,
      title: 'hung response',
      claim:
        'A response whose headers arrive but whose body never finishes is aborted at the body timeout and retried; ' +
        'when the retries are spent the run fails (exit 1) with the cursor where it was, and the process does not hang.',
      method:
        `FEED_TIMEOUT_MS=${TIMEOUT_MS}, FEED_MAX_RETRIES=${RETRIES}. After a first run has caught up and new mail ` +
        "arrived: the simulator's hang fault (headers, then no body at all) on every /events response; a feed server " +
        'that sends half the body and then stalls, at page 3; and `feedsync sync --once` through the CLI against the ' +
        'hanging simulator (FEED_TIMEOUT_MS=500, FEED_MAX_RETRIES=1). Then the fault is lifted and the run repeated.',
    },
    async (rec) => {
      rec.injectedWhat = 'hung responses';
      // The simulator: headers, then silence.
      const box = await sandbox('hung');
      const warm = await run(box, sim.baseUrl);
      expect(warm.result).toMatchObject({ status: 'caught-up' });
      const cursorBefore = await cursorOf(box);
      await sendMail(sim, 'hung');
      sim.setFaults({ hangRate: 1 });
      const hung = await run(box, sim.baseUrl);
      const cursorHung = await cursorOf(box);
      const cliStarted = performance.now();
      const cli = await runCli(
        ['sync', '--once'],
        box.env(sim.baseUrl, { FEED_TIMEOUT_MS: '500', FEED_MAX_RETRIES: '1' }),
        60_000,
      );
      const cliMs = Math.round(performance.now() - cliStarted);
      const cursorCli = await cursorOf(box);
      sim.setFaults({ hangRate: 0 });
      const healed = await run(box, sim.baseUrl);
      rec.injected += hung.attempts.length + 2;

      // A feed server: half the body of page 3, then nothing.
      const box2 = await sandbox('stalled');
      feed.setBad({ page: 3, kind: 'stall-mid-body' });
      const stalled = await run(box2, feed.baseUrl);
      const cursorStalled = await cursorOf(box2);
      feed.setBad(null);
      const healed2 = await run(box2, feed.baseUrl);
      rec.injected += stalled.attempts.length;

      const fate1 = await fateOf(box, await readWholeFeed(sim.baseUrl, TEST_API_KEY));
      const fate2 = await fateOf(box2, EVENTS);
      const all = [...hung.attempts, ...stalled.attempts];
      rec.checked = fate1.served + fate2.served;
      rec.lost = fate1.lost + fate2.lost;
      rec.duplicated = fate1.duplicated + fate2.duplicated;
      rec.figures = [
        ['attempts aborted, headers then no body (in process)', hung.attempts.length],
        ['attempts aborted, half a body then a stall', stalled.attempts.length],
        [
          `time to abort one attempt, ms (timeout ${TIMEOUT_MS}): min / max`,
          `${Math.min(...all)} / ${Math.max(...all)}`,
        ],
        [
          'error code when the retries were spent',
          `${(hung.result as { code?: string }).code}, ${(stalled.result as { code?: string }).code}`,
        ],
        ['cursor before / after the hung runs', `${cursorBefore} / ${cursorHung}, ${cursorCli}`],
        ['cursor after the stalled page 3', cursorStalled ?? 'start'],
        ['CLI run against the hung feed: exit code / wall time incl. start-up', `${cli.code} / ${cliMs} ms`],
      ];

      expect(hung.result).toMatchObject({ code: 'TIMEOUT' });
      expect(hung.attempts).toHaveLength(RETRIES + 1);
      expect(stalled.result).toMatchObject({ code: 'TIMEOUT' });
      expect(stalled.attempts).toHaveLength(RETRIES + 1);
      for (const ms of all) {
        expect(ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
        // undici checks its headers and body timeouts on a coarse timer (about half a
        // second a tick), so an abort lands up to about a second after the timeout.
        expect(ms).toBeLessThan(TIMEOUT_MS + 1_200);
      }
      expect(cursorHung).toBe(cursorBefore);
      expect(cursorCli).toBe(cursorBefore);
      expect(cursorStalled).toBe(EVENTS[199]!.id);
      expect(cli.code).toBe(1);
      expect(healed.result).toMatchObject({ status: 'caught-up', drained: true });
      expect(healed2.result).toMatchObject({ status: 'caught-up', drained: true });
      for (const f of [fate1, fate2])
        expect(f).toMatchObject({ lost: 0, duplicated: 0, strangers: 0, unpublished: 0 });
    },
  );
});
