import { type Logger, pino } from 'pino';
import type { Account } from './account.js';
import { Accounts } from './accounts.js';
import { apiKeyPattern } from './auth.js';
import { badRequest } from './errors.js';
import { DEFAULT_FAULTS, mergeFaults } from './faults.js';
import { RateLimit } from './rate-limit.js';
import { Stats } from './stats.js';
import { Timers } from './timers.js';
import type { Faults, SimulatorOptions, SimulatorStats } from './types.js';
import { Deliverer } from './webhook-deliveries.js';

/** The simulator's whole state, shared by the routes and the in-process API. */
export class SimContext {
  readonly now: () => number;
  readonly random: () => number;
  readonly logger: Logger;
  readonly timers = new Timers();
  readonly stats = new Stats();
  readonly accounts: Accounts;
  /** The keys accepted under `/api`. */
  readonly keyPattern: RegExp;
  readonly deliverer: Deliverer;
  /** The dashboard and `/_sim` admit clients from any address (SimulatorOptions.trustNetwork). */
  readonly trustNetwork: boolean;
  /** `rateLimit`: each account's budget of requests a second, or null for none. */
  readonly rateLimit: RateLimit | null;
  /** Simulator-wide knobs; an account's own knobs win over them. */
  faults: Faults;
  private emailsSent = 0;

  constructor(opts: SimulatorOptions & { defaultKey: string }) {
    this.keyPattern = apiKeyPattern(opts.keyPrefix);
    this.now = opts.now ?? Date.now;
    this.random = opts.random ?? Math.random;
    this.logger = opts.logger ?? pino({ level: 'silent' });
    this.trustNetwork = opts.trustNetwork ?? false;
    this.rateLimit = opts.rateLimit ? new RateLimit(opts.rateLimit, this.now) : null;
    this.faults = mergeFaults({ ...DEFAULT_FAULTS }, opts.faults ?? {});
    this.deliverer = new Deliverer({
      timeScale: opts.timeScale ?? 1,
      timeoutMs: opts.deliveryTimeoutMs ?? 10_000,
      now: this.now,
      timers: this.timers,
      stats: this.stats,
      logger: this.logger,
      scheme: opts.webhookScheme ?? 'service',
      bodyWithoutId: opts.webhookBodyWithoutId ?? false,
    });
    this.accounts = new Accounts(
      opts.defaultKey,
      opts.backlog ?? 0,
      {
        now: this.now,
        deliverer: this.deliverer,
        nextEmailId: () => {
          this.emailsSent += 1;
          return `em_${String(this.emailsSent).padStart(9, '0')}`;
        },
      },
      opts.maxAccounts,
    );
  }

  /** The account of a key named in a control request; a key the API would refuse is a 400 (never echoed). */
  accountForKey(key: string): Account {
    if (!this.keyPattern.test(key))
      throw badRequest('invalid_field', '"key" is not a key this simulator accepts');
    return this.accounts.forKey(key);
  }

  snapshot(): SimulatorStats {
    return this.stats.snapshot(this.accounts.all());
  }
}
