import { createHash } from 'node:crypto';
import { AccountBudget, type AccountBudgetDeps, type BudgetLimits } from './account-budget.js';
import { type Headers, statedBudget } from './stated-budget.js';

/** What a process spent waiting for budgets and how often a service refused it: what the metrics read. */
export interface BudgetTally {
  /** Seconds requests waited for their slot, summed. */
  waitSeconds: number;
  /** 429 answers received, sends included. */
  rateLimited: number;
}

/**
 * The account a key belongs to, as the shared row names it: a SHA-256 of the key under
 * feedsync's own label, never the key. Every source with one key is one account.
 */
export function accountOf(apiKey: string): string {
  return createHash('sha256').update('feedsync request budget\0').update(apiKey).digest('hex');
}

/**
 * The accounts whose budgets a process keeps, the least recently used dropped past it: a
 * fleet's memory must not grow with its sources (DESIGN section 6). A dropped account
 * learns its stated budget again from its next answer; its row keeps the shared pace.
 */
const MAX_ACCOUNTS = 4_096;

/**
 * Every account's budget in this process, made on first use: sources with one key (and
 * the same limits) share one pace, and through the row the replicas share it too.
 */
export class RequestBudgets {
  readonly tally: BudgetTally = { waitSeconds: 0, rateLimited: 0 };
  readonly #deps: AccountBudgetDeps;
  readonly #byAccount = new Map<string, AccountBudget>();

  constructor(deps: Omit<AccountBudgetDeps, 'onWait'> = {}) {
    this.#deps = {
      ...deps,
      onWait: (seconds) => {
        this.tally.waitSeconds += seconds;
      },
    };
  }

  /** The budget of the account `apiKey` belongs to, under these limits. */
  forKey(apiKey: string, limits: BudgetLimits): AccountBudget {
    const account = accountOf(apiKey);
    const name = `${account}/${limits.share}/${limits.maxPerSecond ?? '-'}`;
    let budget = this.#byAccount.get(name);
    if (budget) {
      // Used now: to the end of the order the oldest are dropped in.
      this.#byAccount.delete(name);
    } else {
      budget = new AccountBudget(account, limits, this.#deps);
      if (this.#byAccount.size >= MAX_ACCOUNTS) this.#byAccount.delete(this.#byAccount.keys().next().value!);
    }
    this.#byAccount.set(name, budget);
    return budget;
  }

  /** Reads an answer's headers: the budget it states, and whether it is a 429. */
  answered(budget: AccountBudget, status: number, headers: Headers | undefined): void {
    if (status === 429) this.tally.rateLimited += 1;
    const stated = headers ? statedBudget(headers) : null;
    if (stated) budget.observe(stated);
  }
}
