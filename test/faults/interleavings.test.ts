import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import type { Publisher } from '../../src/queue/publisher.js';
import { createSync } from '../../src/sync/sync.js';
import { seeded } from '../support/random.js';
import { crashablePublisher, crashableStore } from './support/crashable.js';
import { fateOf } from './support/fate.js';
import { ModelFeed } from './support/model-feed.js';
import { measured } from './support/results.js';
import { type Sandbox, useSandboxes } from './support/sandbox.js';
import { publisherOf, QUEUES_IN } from './support/sandbox-queues.js';

const SEED = 0x5eed10;
const NUM_RUNS = 100;
const sandbox = useSandboxes();
const logger = createLogger({ level: 'silent' });
let box: Sandbox;
let publisher: Publisher;

beforeAll(async () => {
  box = await sandbox('interleavings');
  publisher = publisherOf(box);
});
afterAll(async () => {
  await publisher.close();
});

/** Where one run of the worker dies, if it does. */
type Crash =
  | { at: 'none' }
  | { at: 'fetch'; n: number }
  | { at: 'commit'; n: number }
  | { at: 'add-before'; n: number }
  | { at: 'add-after'; n: number }
  | { at: 'sigterm'; n: number };

type Step = { kind: 'run'; crash: Crash } | { kind: 'append'; count: number };

const crashArb: fc.Arbitrary<Crash> = fc.oneof(
  fc.constant<Crash>({ at: 'none' }),
  ...(['fetch', 'commit', 'add-before', 'add-after', 'sigterm'] as const).map((at) =>
    fc.integer({ min: 1, max: 8 }).map((n): Crash => ({ at, n })),
  ),
);
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 3, arbitrary: crashArb.map((crash): Step => ({ kind: 'run', crash })) },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 1, max: 120 }).map((count): Step => ({ kind: 'append', count })),
  },
);
const scenarioArb = fc.record({
  seed: fc.integer(),
  limit: fc.integer({ min: 3, max: 40 }),
  initial: fc.integer({ min: 0, max: 300 }),
  duplicateRate: fc.constantFrom(0, 0.2, 0.5),
  steps: fc.array(stepArb, { minLength: 1, maxLength: 8 }),
});

interface Tally {
  executions: number;
  runs: number;
  crashes: Record<string, number>;
  checked: number;
  lost: number;
  duplicated: number;
  pagesServed: number;
  /** Runs that found the lease of a crashed worker still held (not yet run out). */
  locked: number;
}

/** One worker "process": its own pool and relay, crashing where `crash` says. */
async function runWorker(feed: ModelFeed, source: string, limit: number, crash: Crash, random: () => number) {
  const conn = crashableStore(box.databaseUrl, box.schema);
  // A dead process does nothing more: once crashed, the run is abandoned (everything it
  // still tries is refused) rather than awaited, and the relay stopped.
  let dead: () => void = () => {};
  const died = new Promise<{ ok: false; err: unknown; crashed: true }>((resolve) => {
    dead = () => resolve({ ok: false, err: null, crashed: true });
  });
  const crashNow = (where: string): never => {
    dead();
    return conn.crash(where);
  };
  const pub = crashablePublisher(
    publisher,
    {
      ...(crash.at === 'add-before' ? { before: crash.n } : {}),
      ...(crash.at === 'add-after' ? { after: crash.n } : {}),
    },
    crashNow,
    () => conn.crashed,
  );
  const stop = new AbortController();
  let fetches = 0;
  let commits = 0;
  const fetchModel = feed.fetcher(limit, async () => {
    // Vary how fetches and commits interleave: sometimes a tick, sometimes a millisecond or two.
    const r = random();
    if (r < 0.3) await sleep(Math.floor(r * 10));
    else if (r < 0.7) await new Promise((resolve) => setImmediate(resolve));
  });
  const config = box.config(null, { FEED_SOURCE: source, FEED_PAGE_LIMIT: String(limit) });
  const sync = createSync(config, {
    logger,
    store: conn.store,
    publisher: pub,
    fetchPage: async (after, signal) => {
      if (conn.crashed) conn.crash('(already)');
      fetches++;
      if (crash.at === 'sigterm' && fetches === crash.n) stop.abort();
      const page = await fetchModel(after, signal);
      if (crash.at === 'fetch' && fetches === crash.n) crashNow(`after fetch #${fetches}`);
      return page;
    },
    hooks: {
      onCommit: () => {
        commits++;
        if (crash.at === 'commit' && commits === crash.n) crashNow(`after commit #${commits}`);
      },
    },
  });
  try {
    return await Promise.race([
      sync.runOnce(stop.signal).then(
        (r) => ({ ok: true as const, result: r, crashed: conn.crashed }),
        (err: unknown) => ({ ok: false as const, err, crashed: conn.crashed }),
      ),
      died,
    ]);
  } finally {
    await sync.close().catch(() => {});
    await conn.close();
  }
}

/** Ends the lease of `source` now, as SOURCE_LEASE_MS passing without a renewal would. */
async function expireLease(source: string): Promise<void> {
  await box.store.pool.query(`UPDATE "${box.schema}".leases SET expires_at = now() WHERE source = $1`, [
    source,
  ]);
}

it('10. property: random interleavings of fetches, commits, crashes and restarts store each served event once', async () => {
  await measured(
    {
      item: 10,
      title: 'property: interleavings, crashes, restarts',
      claim:
        'Whatever the order of fetches, commits, crashes and restarts, once a run completes the stored set equals ' +
        'the served set, each event stored once, with one outbox row and one job per event that gets a job.',
      method:
        `fast-check (${NUM_RUNS} scenarios, seed 0x${SEED.toString(16)}) over a model feed in memory that grows between runs and ` +
        'sometimes repeats the last events of the previous page, read through the real page parser, catch-up pipeline, ' +
        `applier and relay against the real Postgres and ${QUEUES_IN}. Each scenario is a sequence of runs and appends; a run ` +
        'may crash after its n-th fetch, after its n-th commit, before or after its n-th addBulk (from then on every ' +
        'query is refused and each connection is destroyed, so Postgres rolls back what was open), or be stopped as by ' +
        'SIGTERM. Each run is a new worker with its own connections. A last run without faults ends each scenario.',
    },
    async (rec) => {
      rec.injectedWhat = 'crashes and stops';
      const tally: Tally = {
        executions: 0,
        runs: 0,
        crashes: {},
        checked: 0,
        lost: 0,
        duplicated: 0,
        pagesServed: 0,
        locked: 0,
      };
      await fc.assert(
        fc.asyncProperty(scenarioArb, async (scenario) => {
          tally.executions++;
          const source = `p${tally.executions}`;
          const random = seeded(scenario.seed);
          const feed = new ModelFeed(random, scenario.duplicateRate);
          feed.append(scenario.initial);
          for (const step of scenario.steps) {
            if (step.kind === 'append') {
              feed.append(step.count);
              continue;
            }
            tally.runs++;
            const outcome = await runWorker(feed, source, scenario.limit, step.crash, random);
            if (outcome.ok && outcome.result.status === 'held-elsewhere') tally.locked++;
            if (
              step.crash.at !== 'none' &&
              (outcome.crashed || (outcome.ok && outcome.result.status === 'stopped'))
            ) {
              tally.crashes[step.crash.at] = (tally.crashes[step.crash.at] ?? 0) + 1;
            }
            if (!outcome.ok && !outcome.crashed) throw outcome.err;
            // A crashed worker's lease runs out after SOURCE_LEASE_MS: let that time pass at once.
            if (outcome.crashed) await expireLease(source);
          }
          // The last run must complete. A run that finds the lease held (a crashed worker's,
          // not yet run out) stops at once ('held-elsewhere', as a CronJob overlapping a dying pod
          // would); the lease then runs out and the next one goes ahead. Bounded.
          for (let attempt = 0; attempt < 100; attempt++) {
            tally.runs++;
            const outcome = await runWorker(feed, source, scenario.limit, { at: 'none' }, random);
            if (!outcome.ok) throw outcome.err;
            if (outcome.result.status !== 'held-elsewhere') {
              expect(outcome.result).toMatchObject({ status: 'caught-up', drained: true });
              break;
            }
            tally.locked++;
            await expireLease(source);
          }
          tally.pagesServed += feed.pages;
          const fate = await fateOf(box, feed.events, source);
          tally.checked += fate.served;
          tally.lost += fate.lost;
          tally.duplicated += fate.duplicated;
          expect(fate).toMatchObject({
            stored: feed.events.length,
            lost: 0,
            duplicated: 0,
            strangers: 0,
            unpublished: 0,
          });
        }),
        { numRuns: NUM_RUNS, seed: SEED, endOnFailure: true },
      );
      rec.injected = Object.values(tally.crashes).reduce((a, b) => a + b, 0);
      rec.checked = tally.checked;
      rec.lost = tally.lost;
      rec.duplicated = tally.duplicated;
      rec.figures = [
        ['scenarios', tally.executions],
        ['worker runs (each a new worker)', tally.runs],
        ...Object.entries(tally.crashes).map(([at, n]): [string, number] => [`faults that struck: ${at}`, n]),
        ['runs that found a crashed worker’s lease not yet run out, and stopped', tally.locked],
        ['feed pages served', tally.pagesServed],
      ];
    },
  );
});
