/**
 * The turns in flight in this process, per account (every source with one key): a lane
 * that took a second source of an account whose request budget is in force would only
 * wait behind the first one's requests, holding a lane another account could use. The
 * scheduler asks `enter` before it runs a turn and picks another source while it says no.
 */
export class AccountTurns {
  readonly #accountOf: (source: string) => { account: string; paced: boolean } | null;
  readonly #inFlight = new Map<string, number>();

  /** `accountOf`: the source's account and whether its budget paces it now; null for a source without a key. */
  constructor(accountOf: (source: string) => { account: string; paced: boolean } | null) {
    this.#accountOf = accountOf;
  }

  /**
   * Counts a turn of `source` in, unless its account is paced and has a turn in flight
   * here already (false; nothing counted). `force`: counted in all the same (nothing else to run).
   */
  enter(source: string, force = false): boolean {
    const of = this.#accountOf(source);
    if (!of) return true;
    const n = this.#inFlight.get(of.account) ?? 0;
    if (n > 0 && of.paced && !force) return false;
    this.#inFlight.set(of.account, n + 1);
    return true;
  }

  /** Counts a turn that `enter` let in out again. */
  leave(source: string): void {
    const of = this.#accountOf(source);
    if (!of) return;
    const n = (this.#inFlight.get(of.account) ?? 1) - 1;
    if (n > 0) this.#inFlight.set(of.account, n);
    else this.#inFlight.delete(of.account);
  }
}
