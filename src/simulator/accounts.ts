import { Account, type AccountDeps, accountIdOf } from './account.js';
import { SimError } from './errors.js';
import type { Registration } from './webhooks.js';

/**
 * The most accounts one simulator makes unless told otherwise. Each holds its own
 * feed, emails and webhooks, and shows in /_sim/stats: a key per request (a load
 * test, a client with a bug) would grow both without end. A fleet bench of
 * thousands of tenants raises it (`maxAccounts`, `--max-accounts`).
 */
export const MAX_ACCOUNTS = 1_000;

/**
 * Every account, by key: one is made the first time its key is used, up to
 * `maxAccounts` (a new key past it is a 403 `too_many_accounts`). The
 * default account (of `defaultKey`) is the one that control calls and the
 * in-process API reach when they name no account.
 */
export class Accounts {
  private readonly byId = new Map<string, Account>();
  readonly default: Account;

  constructor(
    defaultKey: string,
    /** The backlog every account starts with. */
    private readonly backlog: number,
    private readonly deps: AccountDeps,
    private readonly maxAccounts = MAX_ACCOUNTS,
  ) {
    this.default = new Account(defaultKey, true, backlog, deps);
    this.byId.set(this.default.id, this.default);
  }

  /** The account of an accepted key, made now if new. */
  forKey(key: string): Account {
    const id = accountIdOf(key);
    let account = this.byId.get(id);
    if (!account) {
      if (this.byId.size >= this.maxAccounts) {
        throw new SimError(
          403,
          'too_many_accounts',
          `this simulator keeps at most ${this.maxAccounts} accounts (one per key); use a key it knows, restart it, or start it with --max-accounts`,
        );
      }
      account = new Account(key, false, this.backlog, this.deps);
      this.byId.set(id, account);
    }
    return account;
  }

  /** The account with this id, or a 404 `account_not_found`. */
  byAccountId(id: string): Account {
    const account = this.byId.get(id);
    if (!account) throw new SimError(404, 'account_not_found', `no account ${id.slice(0, 64)}`);
    return account;
  }

  all(): Account[] {
    return [...this.byId.values()];
  }

  /** A registration of any account (webhook ids are random, so unique across accounts), or a 404. */
  webhook(id: string): Registration {
    for (const account of this.byId.values()) {
      const reg = account.webhooks.find(id);
      if (reg) return reg;
    }
    throw new SimError(404, 'webhook_not_found', `no webhook with id ${id.slice(0, 64)}`);
  }
}
