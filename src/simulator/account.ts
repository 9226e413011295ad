import { createHash } from 'node:crypto';
import type { ServiceEvent } from '../api/types.js';
import { Emails } from './emails.js';
import { EventLog } from './event-log.js';
import { mergeFaults } from './faults.js';
import type { Faults } from './types.js';
import type { Deliverer } from './webhook-deliveries.js';
import { WebhookRegistry } from './webhooks.js';

/** The id an account is known by on `/_sim` and the dashboard: never the key itself. */
export function accountIdOf(key: string): string {
  return `acct_${createHash('sha256').update(key).digest('hex').slice(0, 12)}`;
}

/** `sim_test_…cdef`: enough to tell keys apart, not enough to use one. */
export function keyHint(key: string): string {
  const match = /^([a-z]+_(?:test|live)_)(.*)$/.exec(key);
  if (!match) return '…';
  const secret = match[2]!;
  return `${match[1]}…${secret.length >= 8 ? secret.slice(-4) : ''}`;
}

export interface AccountDeps {
  now: () => number;
  deliverer: Deliverer;
  /** The next email id: ids are unique across accounts, as at the service. */
  nextEmailId: () => string;
}

/**
 * One API key's account: its own feed, emails, webhooks and backlog. Event ids
 * follow the same sequence in every account (`evt_000000000001` is in each), as
 * they may at a real service; a worker that mixes accounts up is caught by them.
 */
export class Account {
  readonly id: string;
  readonly keyHint: string;
  readonly log: EventLog;
  readonly emails: Emails;
  readonly webhooks: WebhookRegistry;
  /**
   * When its key last changed something through `/api` (an email sent, a webhook
   * registered, ...), in ms; null before. A worker's reads of the feed do not count:
   * the dashboard opens on the account a person used last.
   */
  lastActivityAt: number | null = null;
  /** Fault knobs set for this account alone, over the simulator-wide ones. */
  private faultPatch: Partial<Faults> = {};

  constructor(
    key: string,
    readonly isDefault: boolean,
    backlog: number,
    private readonly deps: AccountDeps,
  ) {
    this.id = accountIdOf(key);
    this.keyHint = keyHint(key);
    // The default account's backlog reads as it always did; every other one names its account.
    this.log = new EventLog(deps.now, isDefault ? null : this.id);
    this.log.setBacklog(backlog);
    this.emails = new Emails((type, data) => this.emit(type, data), deps.nextEmailId);
    this.webhooks = new WebhookRegistry(deps.now, this.id);
  }

  /** Appends an event to this account's feed and starts its deliveries to this account's webhooks. */
  emit(type: string, data: Record<string, unknown>): ServiceEvent {
    const event = this.log.append(type, data);
    for (const reg of this.webhooks.matching(type)) this.deps.deliverer.deliver(reg, event);
    return event;
  }

  /** The knobs in force for this account's requests. */
  faults(global: Faults): Faults {
    return { ...global, ...this.faultPatch };
  }

  /** Sets knobs for this account alone; throws 400 like the simulator-wide ones. */
  setFaults(global: Faults, patch: unknown): Faults {
    const merged = mergeFaults(this.faults(global), patch);
    // mergeFaults has checked every name and value (and rounded some): keep its values.
    for (const name of Object.keys(patch as object) as (keyof Faults)[]) this.faultPatch[name] = merged[name];
    return merged;
  }
}
