import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import type { Claimed } from '../../src/store/lease.js';
import type { SourceLease } from '../../src/store/lease-renewal.js';
import { type Outcome, watchSources } from '../../src/sync/scheduler.js';
import type { RunResult } from '../../src/sync/sync.js';

// watchSources in this process, over a fake claim, sleep and turns: no Postgres, no
// child, no real wait. A claim hands out leases whose release is recorded; a sleep
// waits until the test ends it (or the loop cuts it short); a turn ends when told.

const INTERVAL = 1_000;
const logger = createLogger({ level: 'silent' });

type Release = Parameters<SourceLease['release']>[0];

function leaseOf(source: string, releases: Map<string, Release[]>): SourceLease {
  return {
    source,
    token: '1',
    failures: 0,
    signal: new AbortController().signal,
    lost: false,
    stalled: false,
    progress: () => {},
    cursor: null,
    release: async (opts) => {
      releases.set(source, [...(releases.get(source) ?? []), opts]);
    },
    putBack: async () => {},
  };
}

function caughtUp(): RunResult {
  const counts = { cursor: 'c', pages: 1, stored: 1, duplicates: 0, quarantined: 0 };
  return { status: 'caught-up', ...counts, drained: true, durationMs: 1 };
}

/** A promise and its resolve and reject, to end a turn when the test says. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets the loop run until it waits on something the test holds. */
const settle = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
};

/** A fake world: `due` sources the claim hands out in order, turns the test ends, sleeps it ends. */
function world(
  due: string[],
  opts: { concurrency?: number; claim?: (limit: number) => Promise<Claimed> } = {},
) {
  const stopping = new AbortController();
  const releases = new Map<string, Release[]>();
  const turns = new Map<string, ReturnType<typeof deferred<RunResult>>>();
  const turnSignals = new Map<string, AbortSignal>();
  const claims: number[] = [];
  const sleeps: { ms: number; end: () => void }[] = [];
  const outcomes: Outcome[] = [];
  let running = 0;
  let mostRunning = 0;
  const loop = watchSources({
    concurrency: opts.concurrency ?? 2,
    signal: stopping.signal,
    intervalMs: INTERVAL,
    describe: (err) => `described: ${err instanceof Error ? err.message : String(err)}`,
    logger,
    claim:
      opts.claim ??
      (async (limit) => {
        claims.push(limit);
        const taken = due.splice(0, limit);
        return { leases: taken.map((s) => leaseOf(s, releases)), nextDueInMs: due.length > 0 ? 0 : null };
      }),
    turn: async (lease, signal) => {
      const turn = deferred<RunResult>();
      turns.set(lease.source, turn);
      turnSignals.set(lease.source, signal);
      running++;
      mostRunning = Math.max(mostRunning, running);
      try {
        return await turn.promise;
      } finally {
        running--;
      }
    },
    onOutcome: (outcome) => outcomes.push(outcome),
    sleep: (ms, signal) =>
      new Promise<void>((resolve, reject) => {
        const sleep = { ms, end: resolve };
        sleeps.push(sleep);
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      }),
  });
  return {
    loop,
    stopping,
    releases,
    turns,
    turnSignals,
    claims,
    sleeps,
    outcomes,
    running: () => running,
    mostRunning: () => mostRunning,
  };
}

describe('watchSources', () => {
  it('runs at most `concurrency` turns at a time, and claims for a lane as soon as it frees', async () => {
    const w = world(['a', 'b', 'c', 'd'], { concurrency: 2 });
    await settle();
    expect([...w.turns.keys()]).toEqual(['a', 'b']);
    expect(w.claims).toEqual([2]);
    w.turns.get('a')!.resolve(caughtUp());
    await settle();
    // The turn's end cut the loop's sleep short: one lane free, one source claimed.
    expect(w.claims).toEqual([2, 1]);
    expect([...w.turns.keys()]).toEqual(['a', 'b', 'c']);
    for (const s of ['b', 'c']) w.turns.get(s)!.resolve(caughtUp());
    await settle();
    w.turns.get('d')!.resolve(caughtUp());
    await settle();
    w.stopping.abort();
    await w.loop;
    expect(w.mostRunning()).toBe(2);
    expect(w.outcomes.map((o) => o.source)).toEqual(['a', 'b', 'c', 'd']);
  });

  it('gives each claimed source one turn and its lease back due an interval later', async () => {
    const w = world(['a', 'b', 'c'], { concurrency: 3 });
    await settle();
    for (const turn of w.turns.values()) turn.resolve(caughtUp());
    await settle();
    w.stopping.abort();
    await w.loop;
    expect([...w.turns.keys()]).toEqual(['a', 'b', 'c']);
    for (const source of ['a', 'b', 'c']) {
      expect(w.releases.get(source)).toEqual([
        { failed: false, succeeded: true, dueInMs: INTERVAL, by: 'watch' },
      ]);
    }
    expect(w.outcomes.every((o) => o.ok)).toBe(true);
  });

  it('keeps going after a turn throws: the failure is the outcome, and the next source gets its turn', async () => {
    const w = world(['a', 'b'], { concurrency: 1 });
    await settle();
    w.turns.get('a')!.reject(new Error('key rejected'));
    await settle();
    expect([...w.turns.keys()]).toEqual(['a', 'b']);
    w.turns.get('b')!.resolve(caughtUp());
    await settle();
    w.stopping.abort();
    await w.loop;
    expect(w.outcomes.map((o) => [o.source, o.ok])).toEqual([
      ['a', false],
      ['b', true],
    ]);
    expect(w.releases.get('a')).toEqual([
      { failed: true, succeeded: false, dueInMs: INTERVAL, error: 'described: key rejected', by: 'watch' },
    ]);
  });

  it('waits an interval when nothing is claimed, and claims again when the wait ends', async () => {
    const w = world([]);
    await settle();
    expect(w.claims).toEqual([2]);
    expect(w.sleeps.map((s) => s.ms)).toEqual([INTERVAL]);
    await settle();
    expect(w.claims).toEqual([2]);
    w.sleeps[0]!.end();
    await settle();
    expect(w.claims).toEqual([2, 2]);
    expect(w.sleeps.map((s) => s.ms)).toEqual([INTERVAL, INTERVAL]);
    w.stopping.abort();
    await w.loop;
  });

  it('sleeps until the next source is due, never less than a beat', async () => {
    const dueIn = [300, 0];
    const w = world([], { claim: async () => ({ leases: [], nextDueInMs: dueIn.shift() ?? null }) });
    await settle();
    w.sleeps[0]!.end();
    await settle();
    expect(w.sleeps.map((s) => s.ms)).toEqual([300, 100]);
    w.stopping.abort();
    await w.loop;
  });

  it('backs off a claim that fails, doubling the wait', async () => {
    const failures: number[] = [];
    const w = world([], {
      claim: async () => {
        failures.push(failures.length);
        throw new Error('Postgres is not answering');
      },
    });
    await settle();
    w.sleeps[0]!.end();
    await settle();
    expect(w.sleeps.map((s) => s.ms)).toEqual([INTERVAL, 2 * INTERVAL]);
    w.stopping.abort();
    await w.loop;
  });

  it('stops promptly when the signal aborts, and returns once the turns in flight have ended', async () => {
    const w = world(['a'], { concurrency: 2 });
    await settle();
    expect(w.sleeps).toHaveLength(1);
    w.stopping.abort();
    let returned = false;
    void w.loop.then(() => {
      returned = true;
    });
    await settle();
    // The sleep was cut short and no claim followed; the turn in flight was told to stop.
    expect(w.claims).toEqual([2]);
    expect(w.turnSignals.get('a')!.aborted).toBe(true);
    expect(returned).toBe(false);
    w.turns.get('a')!.resolve({ ...caughtUp(), status: 'stopped' });
    await w.loop;
    expect(w.outcomes.map((o) => o.source)).toEqual(['a']);
    // Stopped short of its feed's end: due again at once, for whichever worker is next.
    expect(w.releases.get('a')).toEqual([{ failed: false, succeeded: false, dueInMs: 0, by: 'watch' }]);
  });
});
