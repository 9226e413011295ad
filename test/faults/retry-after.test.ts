import { afterAll, beforeAll, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import type { Simulator } from '../../src/simulator/index.js';
import { createSync } from '../../src/sync/sync.js';
import { startTestSimulator, TEST_API_KEY } from '../support/simulator.js';
import { fateOf } from './support/fate.js';
import { measured } from './support/results.js';
import { type Sandbox, useSandboxes } from './support/sandbox.js';
import { readWholeFeed } from './support/served.js';

const RETRY_AFTER_S = 120;
const sandbox = useSandboxes();
const logger = createLogger({ level: 'silent' });
let sim: Simulator;

beforeAll(async () => {
  sim = await startTestSimulator({ backlog: 1_000 });
});
afterAll(async () => {
  await sim.close();
});

/** A clock that moves only when the retry loop sleeps, and a record of what each request met. */
function virtualClock() {
  let now = Date.parse('2024-05-01T00:00:00Z');
  const sleeps: number[] = [];
  const responses: { status: number; at: number }[] = [];
  return {
    sleeps,
    responses,
    now: () => now,
    advance(ms: number) {
      sleeps.push(ms);
      now += ms;
    },
    /** The shortest gap, on this clock, between a 429 and the request after it. */
    minGapAfter429(): number {
      let min = Number.POSITIVE_INFINITY;
      responses.forEach((r, i) => {
        const next = responses[i + 1];
        if (r.status === 429 && next) min = Math.min(min, next.at - r.at);
      });
      return min;
    },
  };
}

/**
 * One run with the simulator answering 429 (Retry-After: `retryAfter` s) from the
 * `fromPage`-th request on, `count` times in a row.
 */
async function run(box: Sandbox, opts: { fromPage: number; count: number; retryAfter: number }) {
  const clock = virtualClock();
  let okPages = 0;
  let limited = 0;
  if (opts.fromPage === 1) sim.setFaults({ rate429: 1, retryAfterSec: opts.retryAfter });
  const config = box.config(sim.baseUrl);
  const sync = createSync(config, {
    logger,
    store: box.store,
    hooks: {
      onFeedResponse: ({ status }) => {
        clock.responses.push({ status, at: clock.now() });
        if (status === 200 && ++okPages === opts.fromPage - 1) {
          sim.setFaults({ rate429: 1, retryAfterSec: opts.retryAfter });
        }
        if (status === 429 && ++limited === opts.count) sim.setFaults({ rate429: 0 });
      },
    },
    retryDeps: {
      now: clock.now,
      random: () => 0.5,
      sleep: async (ms) => clock.advance(ms),
    },
  });
  const started = performance.now();
  try {
    const result = await sync.runOnce().catch((err: { code?: string }) => err);
    return { result, clock, limited, realMs: Math.round(performance.now() - started) };
  } finally {
    sim.setFaults({ rate429: 0 });
    await sync.close();
  }
}

it('6. 429 with Retry-After: 120: the next request waits at least that long (an injected clock)', async () => {
  await measured(
    {
      item: 6,
      title: '429 with Retry-After',
      claim:
        'After a 429 with Retry-After: 120 the next request is sent no sooner than 120 s later, however small the ' +
        'backoff would have been; a Retry-After beyond FEED_MAX_RETRY_WAIT_MS fails the run at once, cursor unchanged.',
      method:
        `The simulator answers 429 with Retry-After: ${RETRY_AFTER_S} on the first request, then on the fifth page ` +
        'three times in a row. The sync runs in process with an injected clock and sleep (no real waiting): the clock ' +
        'moves only when the retry loop sleeps, and every response is stamped with it. Then a Retry-After of 700 s ' +
        '(over the default FEED_MAX_RETRY_WAIT_MS of 600000).',
    },
    async (rec) => {
      rec.injectedWhat = '429 answers';
      const box = await sandbox('retry_after');
      const first = await run(box, { fromPage: 1, count: 1, retryAfter: RETRY_AFTER_S });
      const box2 = await sandbox('retry_after_mid');
      const mid = await run(box2, { fromPage: 5, count: 3, retryAfter: RETRY_AFTER_S });
      const box3 = await sandbox('retry_after_long');
      const long = await run(box3, { fromPage: 1, count: 1, retryAfter: 700 });
      rec.injected = first.limited + mid.limited + long.limited;

      const served = await readWholeFeed(sim.baseUrl, TEST_API_KEY);
      const fates = await Promise.all([box, box2].map((b) => fateOf(b, served)));
      const cursor = await box3.store.pool.query<{ after_id: string | null }>(
        `SELECT after_id FROM "${box3.schema}".cursors`,
      );
      rec.checked = fates.reduce((a, f) => a + f.served, 0);
      rec.lost = fates.reduce((a, f) => a + f.lost, 0);
      rec.duplicated = fates.reduce((a, f) => a + f.duplicated, 0);
      rec.figures = [
        ['waits recorded after the first 429, ms', first.clock.sleeps.join(', ')],
        ['waits recorded after three 429s on page 5, ms', mid.clock.sleeps.join(', ')],
        [
          'shortest gap between a 429 and the next request, on the injected clock',
          `${Math.min(first.clock.minGapAfter429(), mid.clock.minGapAfter429()) / 1000} s`,
        ],
        ['real time of those two runs', `${first.realMs + mid.realMs} ms`],
        [
          'Retry-After 700 s: error code / waits / cursor after',
          `${(long.result as { code?: string }).code} / ${long.clock.sleeps.length} / ${cursor.rows[0]?.after_id ?? 'start'}`,
        ],
      ];

      expect(first.result).toMatchObject({ status: 'caught-up', drained: true });
      expect(mid.result).toMatchObject({ status: 'caught-up', drained: true });
      expect(first.clock.sleeps).toEqual([RETRY_AFTER_S * 1000]);
      expect(mid.clock.sleeps).toHaveLength(3);
      for (const ms of mid.clock.sleeps) expect(ms).toBeGreaterThanOrEqual(RETRY_AFTER_S * 1000);
      expect(first.clock.minGapAfter429()).toBeGreaterThanOrEqual(RETRY_AFTER_S * 1000);
      expect(mid.clock.minGapAfter429()).toBeGreaterThanOrEqual(RETRY_AFTER_S * 1000);
      expect(long.result).toMatchObject({ code: 'RETRY_WAIT_TOO_LONG' });
      expect(long.clock.sleeps).toEqual([]);
      expect(cursor.rows[0]?.after_id ?? null).toBeNull();
      for (const f of fates)
        expect(f).toMatchObject({ lost: 0, duplicated: 0, strangers: 0, unpublished: 0 });
    },
  );
});
