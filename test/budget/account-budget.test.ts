import { describe, expect, it } from 'vitest';
import { AccountBudget, type ReserveSlots } from '../../src/budget/account-budget.js';
import { accountOf, RequestBudgets } from '../../src/budget/request-budgets.js';
import { statedBudget } from '../../src/budget/stated-budget.js';

/** Time that moves only when every task waits: a sleep resolves once the clock reaches it. */
class VirtualTime {
  now = 0;
  #timers: { at: number; resolve: () => void }[] = [];
  readonly sleep = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      this.#timers.push({ at: this.now + ms, resolve });
    });
  /** Runs until `work` settles, moving the clock to the next timer whenever nothing else can run. */
  async run<T>(work: Promise<T>): Promise<T> {
    let done = false;
    const result = work.finally(() => {
      done = true;
    });
    for (let i = 0; i < 100_000 && !done; i++) {
      await new Promise((r) => setImmediate(r));
      if (done) break;
      this.#timers.sort((a, b) => a.at - b.at);
      const next = this.#timers.shift();
      if (!next) continue;
      this.now = Math.max(this.now, next.at);
      next.resolve();
    }
    return result;
  }
}

/** The request_budgets row, in memory: the next free moment, as reserveRequestSlots moves it. */
function sharedRow(time: VirtualTime): { reserve: ReserveSlots; statements: () => number } {
  let next = 0;
  let statements = 0;
  return {
    statements: () => statements,
    reserve: async (_account, count, intervalMs) => {
      statements++;
      const first = Math.max(next, time.now);
      next = first + count * intervalMs;
      return first - time.now;
    },
  };
}

/** An account's budget at the default share on the virtual clock, reserving in `row`. */
function budgetOn(time: VirtualTime, row: ReturnType<typeof sharedRow>): AccountBudget {
  return new AccountBudget(
    'a',
    { share: 0.5, maxPerSecond: null },
    { ...row, now: () => time.now, sleep: time.sleep },
  );
}

/** The most requests in any window of `ms` starting at a request. */
function busiestWindow(times: readonly number[], ms: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0; i < sorted.length; i++) {
    let n = 0;
    while (i + n < sorted.length && sorted[i + n]! < sorted[i]! + ms) n++;
    most = Math.max(most, n);
  }
  return most;
}

async function requests(budget: AccountBudget, time: VirtualTime, n: number, into: number[]): Promise<void> {
  for (let i = 0; i < n; i++) {
    await budget.take();
    into.push(time.now);
  }
}

describe('statedBudget', () => {
  it('reads RateLimit-*, X-RateLimit-* in any letter case, the combined field and a policy window', () => {
    expect(
      statedBudget({ 'ratelimit-limit': '5', 'ratelimit-remaining': '4', 'ratelimit-reset': '1' }),
    ).toEqual({
      limit: 5,
      remaining: 4,
      resetSeconds: 1,
      windowSeconds: null,
    });
    expect(
      statedBudget({ 'X-RateLimit-Limit': '100', 'X-RATELIMIT-REMAINING': '0', 'x-ratelimit-reset': '30' }),
    ).toEqual({ limit: 100, remaining: 0, resetSeconds: 30, windowSeconds: null });
    expect(
      statedBudget({ RateLimit: 'limit=10, remaining=3, reset=2', 'RateLimit-Policy': '10;w=2' }),
    ).toEqual({
      limit: 10,
      remaining: 3,
      resetSeconds: 2,
      windowSeconds: 2,
    });
    expect(statedBudget({ 'content-type': 'application/json' })).toBeNull();
    expect(statedBudget({ 'ratelimit-limit': 'many' })).toBeNull();
    expect(statedBudget({ 'ratelimit-limit': '0' })).toBeNull();
  });
});

describe('AccountBudget', () => {
  it('with no budget stated and no cap, waits for nothing and touches no row', async () => {
    const time = new VirtualTime();
    const row = sharedRow(time);
    const budget = budgetOn(time, row);
    const times: number[] = [];
    await time.run(requests(budget, time, 50, times));
    expect(times.every((t) => t === 0)).toBe(true);
    expect(row.statements()).toBe(0);
  });

  it('a stated budget of 5/s at a share of 0.5: evenly 2.5 a second, one statement per batch of slots', async () => {
    const time = new VirtualTime();
    const row = sharedRow(time);
    const budget = budgetOn(time, row);
    budget.observe({ limit: 5, remaining: 4, resetSeconds: 1, windowSeconds: null });
    expect(budget.rate()).toBe(2.5);
    const times: number[] = [];
    await time.run(requests(budget, time, 40, times));
    for (let i = 1; i < times.length; i++)
      expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(400 - 1e-6);
    expect(times[times.length - 1]!).toBeLessThanOrEqual(40 * 400);
    // Batches of about a second's worth (3 slots): the row is touched once per several requests.
    expect(row.statements()).toBeLessThanOrEqual(Math.ceil(40 / 3) + 1);
  });

  it('two replicas on one row keep the rate together, and the cap bounds a stated budget', async () => {
    const time = new VirtualTime();
    const row = sharedRow(time);
    const deps = { ...row, now: () => time.now, sleep: time.sleep };
    const limits = { share: 0.5, maxPerSecond: 4 };
    const a = new AccountBudget('a', limits, deps);
    const b = new AccountBudget('a', limits, deps);
    for (const budget of [a, b])
      budget.observe({ limit: 20, remaining: 19, resetSeconds: 1, windowSeconds: null });
    expect(a.rate()).toBe(4);
    const times: number[] = [];
    await time.run(Promise.all([requests(a, time, 30, times), requests(b, time, 30, times)]));
    // Each replica's first request after a quiet spell goes at once (paid for in its next batch).
    expect(busiestWindow(times, 1000)).toBeLessThanOrEqual(4 + 2);
    expect(busiestWindow(times.slice(4), 3000)).toBeLessThanOrEqual(12 + 2);
    expect(Math.max(...times)).toBeGreaterThanOrEqual((60 - 2) * 250 - 1);
  });

  it('a window the service says is spent holds every request until it resets', async () => {
    const time = new VirtualTime();
    const budget = new AccountBudget(
      'a',
      { share: 0.5, maxPerSecond: null },
      { now: () => time.now, sleep: time.sleep },
    );
    budget.observe({ limit: 5, remaining: 0, resetSeconds: 3, windowSeconds: null });
    const times: number[] = [];
    await time.run(requests(budget, time, 1, times));
    // Reset is whole seconds rounded up: the window ends after 2 s at the soonest.
    expect(times[0]).toBeGreaterThanOrEqual(2000);
  });

  it('a slot taken ahead (takeAhead) lets the next request go at once', async () => {
    const time = new VirtualTime();
    const budget = new AccountBudget(
      'a',
      { share: 1, maxPerSecond: 1 },
      { now: () => time.now, sleep: time.sleep },
    );
    const times: number[] = [];
    await time.run(requests(budget, time, 1, times));
    await time.run(budget.takeAhead());
    const ahead = time.now;
    await time.run(requests(budget, time, 1, times));
    expect(times[1]).toBe(ahead);
    expect(ahead).toBeGreaterThanOrEqual(1000);
  });
});

describe('RequestBudgets', () => {
  it('one budget per account and limits, named by a hash of the key; a 429 is counted', () => {
    const budgets = new RequestBudgets();
    const limits = { share: 0.5, maxPerSecond: null };
    const key = 'svc_live_secret_key_123';
    expect(budgets.forKey(key, limits)).toBe(budgets.forKey(key, { ...limits }));
    expect(budgets.forKey(key, limits)).not.toBe(budgets.forKey('svc_live_other', limits));
    expect(accountOf(key)).toMatch(/^[0-9a-f]{64}$/);
    expect(accountOf(key)).not.toContain('secret');
    const budget = budgets.forKey(key, limits);
    budgets.answered(budget, 429, {
      'ratelimit-limit': '4',
      'ratelimit-remaining': '0',
      'ratelimit-reset': '1',
    });
    expect(budgets.tally.rateLimited).toBe(1);
    expect(budget.rate()).toBe(2);
  });
});
