import { expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import type { SourceLease } from '../../src/store/lease-renewal.js';
import { AccountTurns, runEachOnce, watchSources } from '../../src/sync/scheduler.js';
import type { RunResult } from '../../src/sync/sync.js';

// The scheduler with turns per account: hot1 and hot2 share a paced account, q1 and q2
// have accounts of their own. Over a fake claim, turns and sleep: no Postgres, no wait.

const caughtUp: RunResult = {
  status: 'caught-up',
  cursor: 'c',
  pages: 1,
  stored: 0,
  duplicates: 0,
  quarantined: 0,
  drained: true,
  durationMs: 1,
};
const settle = async (): Promise<void> => {
  for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
};
const accounts = () =>
  new AccountTurns((source) => ({ account: source.startsWith('hot') ? 'hot' : source, paced: true }));

/** Turns that end when the test says, and the order they started in. */
function turns() {
  const started: string[] = [];
  const ends = new Map<string, () => void>();
  return {
    started,
    end: (source: string) => ends.get(source)!(),
    turn: (lease: SourceLease) => {
      started.push(lease.source);
      return new Promise<RunResult>((resolve) => ends.set(lease.source, () => resolve(caughtUp)));
    },
  };
}

function leaseOf(source: string, putBack: (source: string) => void): SourceLease {
  return {
    source,
    token: '1',
    failures: 0,
    signal: new AbortController().signal,
    lost: false,
    stalled: false,
    progress: () => {},
    cursor: null,
    release: async () => {},
    putBack: async () => putBack(source),
  };
}

it('sync --once: a lane takes the next source whose account has no turn here, and the paced account waits off the lanes', async () => {
  const t = turns();
  const done = runEachOnce({
    sources: ['hot1', 'hot2', 'q1', 'q2'],
    concurrency: 2,
    signal: new AbortController().signal,
    intervalMs: 1_000,
    describe: String,
    accounts: accounts(),
    take: async (source) => leaseOf(source, () => {}),
    turn: t.turn,
  });
  await settle();
  expect(t.started).toEqual(['hot1', 'q1']);
  t.end('q1');
  await settle();
  expect(t.started).toEqual(['hot1', 'q1', 'q2']);
  // Only hot2 is left: it runs beside hot1 (the two share one pace).
  t.end('q2');
  await settle();
  expect(t.started).toEqual(['hot1', 'q1', 'q2', 'hot2']);
  t.end('hot1');
  t.end('hot2');
  await done;
});

it('sync --watch: a claimed source of an account with a turn here goes back untouched, and the lane claims past it', async () => {
  const t = turns();
  // Most overdue first; a lease put back stays where it was.
  const due = ['hot1', 'hot2', 'q1', 'q2'];
  const putBacks: string[] = [];
  const claims: number[] = [];
  const stopping = new AbortController();
  const loop = watchSources({
    concurrency: 2,
    signal: stopping.signal,
    intervalMs: 30_000,
    describe: String,
    logger: createLogger({ level: 'silent' }),
    accounts: accounts(),
    claim: async (limit) => {
      claims.push(limit);
      const taken = due.splice(0, limit);
      return {
        leases: taken.map((s) =>
          leaseOf(s, (source) => {
            putBacks.push(source);
            due.unshift(source);
          }),
        ),
        nextDueInMs: due.length > 0 ? 0 : null,
      };
    },
    turn: t.turn,
    sleep: (_ms, signal) =>
      new Promise<void>((resolve) => {
        signal.addEventListener('abort', () => resolve(), { once: true });
        setImmediate(resolve);
      }),
  });
  await settle();
  expect(t.started).toEqual(['hot1', 'q1']);
  // Claimed first each time (the most overdue), and put back each time while hot1 runs.
  expect(new Set(putBacks)).toEqual(new Set(['hot2']));
  // The second claim asked past the source put back: one free lane and one held back.
  expect(claims.slice(0, 2)).toEqual([2, 2]);
  t.end('q1');
  await settle();
  expect(t.started).toEqual(['hot1', 'q1', 'q2']);
  t.end('hot1');
  await settle();
  expect(t.started).toContain('hot2');
  stopping.abort();
  for (const s of ['q2', 'hot2']) t.end(s);
  await loop;
});
