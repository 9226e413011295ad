import { defaultSleep } from '../sleep.js';
import type { StatedBudget } from './stated-budget.js';

/** What an account's requests may spend: FEED_RATE_SHARE and FEED_MAX_REQUESTS_PER_SECOND, or a source's own. */
export interface BudgetLimits {
  /** The share of a stated budget feedsync spends, in (0, 1]. */
  share: number;
  /** Requests a second at most, stated budget or not; null for no cap of our own. */
  maxPerSecond: number | null;
}

/**
 * Reserves `count` consecutive slots, `intervalMs` apart, in the account's shared row
 * (one statement), and resolves to the milliseconds from now until the first of them.
 */
export type ReserveSlots = (account: string, count: number, intervalMs: number) => Promise<number>;

export interface AccountBudgetDeps {
  /** The shared row; without it (or while it fails) the pacing is this process's alone. */
  reserve?: ReserveSlots;
  /** Told when reserving failed, and pacing went on locally. */
  onReserveFailure?: (err: unknown) => void;
  /** Told of every wait for the budget, in seconds. */
  onWait?: (seconds: number) => void;
  /** A monotonic clock in ms. Default performance.now. */
  now?: () => number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/** Slots taken from the shared row at once: about a second of requests, at most this many. */
const MAX_BATCH = 20;
/** The longest window a Reset may suggest, in seconds: past it the stated rate is read as an hour's. */
const MAX_WINDOW_SECONDS = 3_600;

/**
 * The pace of one account's requests in this process, and its share of the account's row.
 * No budget known and no cap: `take` costs nothing, no wait and no statement. Otherwise
 * requests go one per slot, `1 / rate` apart (spread evenly, never a burst): slots come
 * from the account's row in Postgres, a batch of about a second's worth per statement,
 * so every replica's requests to the account together keep the rate. A request after a
 * quiet spell (a caught-up turn's one page) goes at once and is paid for in the next
 * batch: a turn that makes one request adds no statement.
 */
export class AccountBudget {
  readonly #account: string;
  readonly #limits: BudgetLimits;
  readonly #deps: AccountBudgetDeps;
  readonly #now: () => number;
  readonly #sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Requests a second the service states (limit over window), or null before it says. */
  #stated: number | null = null;
  #window = 1;
  /** Local times (ms) of the slots reserved and not used yet, in order. */
  #slots: number[] = [];
  /** Requests sent on the quiet allowance, not yet reserved in the row. */
  #owed = 0;
  #last = Number.NEGATIVE_INFINITY;
  /** No request before this local time: the service said the window's budget is spent. */
  #notBefore = 0;
  /** Slots waited for ahead of their request (`takeAhead`): the next requests go without waiting. */
  #prepaid = 0;
  /** Takers in turn, so that slots go out in order. */
  #queue: Promise<void> = Promise.resolve();

  constructor(account: string, limits: BudgetLimits, deps: AccountBudgetDeps = {}) {
    this.#account = account;
    this.#limits = limits;
    this.#deps = deps;
    this.#now = deps.now ?? (() => performance.now());
    this.#sleep = deps.sleep ?? defaultSleep;
  }

  /** Requests a second this account's requests may make now, or null for no pacing at all. */
  rate(): number | null {
    const fromStated = this.#stated === null ? null : this.#stated * this.#limits.share;
    const cap = this.#limits.maxPerSecond;
    if (fromStated === null) return cap;
    return cap === null ? fromStated : Math.min(cap, fromStated);
  }

  /** Waits for this request's slot (resolves at once with no budget in force); rejects when the signal aborts. */
  take(signal?: AbortSignal): Promise<void> {
    if (this.#prepaid > 0) {
      this.#prepaid -= 1;
      return Promise.resolve();
    }
    if (this.rate() === null) {
      // Unpaced until the service states a budget; the first answer that does starts the pace from here.
      this.#last = this.#now();
      return Promise.resolve();
    }
    const turn = this.#queue.then(() => this.#next(signal));
    // The next taker waits for this one's slot, whatever became of it.
    this.#queue = turn.catch(() => {});
    return turn;
  }

  /**
   * Waits for the next request's slot before the caller holds anything for it (a lane's
   * share of the page memory): the request then goes at once. A lane that waits for its
   * account's budget so holds nothing another account's lane needs.
   */
  async takeAhead(signal?: AbortSignal): Promise<void> {
    if (this.rate() === null) return;
    await this.take(signal);
    this.#prepaid += 1;
  }

  /** Reads the budget an answer states. */
  observe(budget: StatedBudget): void {
    if (budget.resetSeconds !== null) {
      this.#window = Math.min(MAX_WINDOW_SECONDS, Math.max(this.#window, budget.resetSeconds));
      // The window's budget is spent (by the application, or by us): nothing before it ends.
      // Reset counts whole seconds, rounded up: the window may end up to a second sooner,
      // and the even pace alone keeps a window of a second or so.
      if (budget.remaining === 0 && budget.resetSeconds > 1)
        this.#notBefore = Math.max(this.#notBefore, this.#now() + (budget.resetSeconds - 1) * 1000);
    }
    this.#stated = budget.limit / (budget.windowSeconds ?? this.#window);
  }

  async #next(signal?: AbortSignal): Promise<void> {
    const rate = this.rate();
    if (rate === null) return;
    const interval = 1000 / rate;
    const now = this.#now();
    // A slot more than one interval old is gone: using it now would be a burst.
    while (this.#slots.length > 0 && this.#slots[0]! < now - interval) this.#slots.shift();
    let at: number;
    if (this.#slots.length > 0) {
      at = this.#slots.shift()!;
    } else if (now - this.#last >= Math.max(1000, 2 * interval) && now >= this.#notBefore) {
      // Quiet for a while: this one goes now, and the next batch pays for it.
      this.#owed += 1;
      at = now;
    } else {
      at = await this.#reserve(rate, interval, now);
    }
    at = Math.max(at, this.#last + interval, this.#notBefore);
    const wait = at - this.#now();
    if (wait > 0) {
      this.#deps.onWait?.(wait / 1000);
      await this.#sleep(wait, signal);
    }
    // The slot, not the moment the timer fired: a timer's lateness must not add up into a slower pace.
    this.#last = at;
  }

  /** A batch of slots from the shared row; the first is returned, the rest kept. Local pacing when the row fails. */
  async #reserve(rate: number, interval: number, now: number): Promise<number> {
    const batch = Math.max(1, Math.min(MAX_BATCH, Math.round(rate)));
    const count = batch + this.#owed;
    if (!this.#deps.reserve) {
      this.#owed = 0;
      return Math.max(now, this.#last + interval);
    }
    try {
      const firstInMs = await this.#deps.reserve(this.#account, count, interval);
      const local = this.#now();
      this.#owed = 0;
      // The owed slots were spent already: the batch starts after them.
      for (let i = count - batch; i < count; i++) this.#slots.push(local + firstInMs + i * interval);
      return this.#slots.shift()!;
    } catch (err) {
      this.#deps.onReserveFailure?.(err);
      return Math.max(now, this.#last + interval);
    }
  }
}
