/**
 * `--rate-limit N`: at most N requests a second per account, over every /api endpoint
 * (sends included), as a service with a team budget answers. Windows are whole seconds
 * of the clock; each answer states the budget in `RateLimit-Limit`, `-Remaining` and
 * `-Reset` (seconds until the window ends), and a request past it is a 429 with
 * `Retry-After`. One counter per account: bounded by the accounts the simulator keeps.
 */
export class RateLimit {
  readonly #perSecond: number;
  readonly #now: () => number;
  readonly #windows = new Map<string, { second: number; used: number }>();

  constructor(perSecond: number, now: () => number) {
    this.#perSecond = perSecond;
    this.#now = now;
  }

  /** Counts one request of `account`: whether it is within the budget, and the headers that say the budget. */
  admit(account: string): { ok: boolean; headers: Record<string, string> } {
    const now = this.#now();
    const second = Math.floor(now / 1000);
    let window = this.#windows.get(account);
    if (!window || window.second !== second) {
      window = { second, used: 0 };
      this.#windows.set(account, window);
    }
    const ok = window.used < this.#perSecond;
    if (ok) window.used += 1;
    const reset = String(Math.max(1, Math.ceil(((second + 1) * 1000 - now) / 1000)));
    const headers: Record<string, string> = {
      'ratelimit-limit': String(this.#perSecond),
      'ratelimit-remaining': String(this.#perSecond - window.used),
      'ratelimit-reset': reset,
    };
    if (!ok) headers['retry-after'] = reset;
    return { ok, headers };
  }
}
