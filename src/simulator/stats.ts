import type { Account } from './account.js';
import type { AccountStats, SimulatorStats } from './types.js';

type Requests = SimulatorStats['requests'];
type Deliveries = SimulatorStats['webhook_deliveries'];

/** Requests by route and status, and webhook delivery attempts. */
class Counters {
  private readonly requests = new Map<string, Map<number, number>>();
  private readonly deliveries = { attempted: 0, succeeded: 0, failed: 0 };
  private rateLimited = 0;

  request(route: string, status: number): void {
    const byStatus = this.requests.get(route) ?? new Map<number, number>();
    byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
    this.requests.set(route, byStatus);
  }

  delivery(ok: boolean): void {
    this.deliveries.attempted += 1;
    if (ok) this.deliveries.succeeded += 1;
    else this.deliveries.failed += 1;
  }

  overBudget(): void {
    this.rateLimited += 1;
  }

  snapshot(): { requests: Requests; webhook_deliveries: Deliveries; rate_limited: number } {
    const requests: Requests = {};
    for (const [route, byStatus] of this.requests) {
      requests[route] = Object.fromEntries([...byStatus].map(([status, n]) => [String(status), n]));
    }
    return { requests, webhook_deliveries: { ...this.deliveries }, rate_limited: this.rateLimited };
  }
}

/** Counters behind `GET /_sim/stats`: the totals, and the same per account. */
export class Stats {
  private readonly total = new Counters();
  private readonly byAccount = new Map<string, Counters>();

  /** One answered request, by route name (`GET /api/events`) and status; `account` when a key named one. */
  request(account: string | null, route: string, status: number): void {
    this.total.request(route, status);
    if (account !== null) this.of(account).request(route, status);
  }

  /** One request of `account` refused because its budget was spent (also counted as its 429). */
  rateLimited(account: string): void {
    this.total.overBudget();
    this.of(account).overBudget();
  }

  /** One webhook delivery attempt for a registration of `account`. */
  delivery(account: string, ok: boolean): void {
    this.total.delivery(ok);
    this.of(account).delivery(ok);
  }

  snapshot(accounts: readonly Account[]): SimulatorStats {
    const breakdown: Record<string, AccountStats> = {};
    let emailsSent = 0;
    let events = 0;
    for (const account of accounts) {
      emailsSent += account.emails.count;
      events += account.log.size;
      breakdown[account.id] = {
        key_hint: account.keyHint,
        default: account.isDefault,
        emails_sent: account.emails.count,
        events: account.log.size,
        webhooks: account.webhooks.list().length,
        ...this.of(account.id).snapshot(),
      };
    }
    return { emails_sent: emailsSent, ...this.total.snapshot(), events, accounts: breakdown };
  }

  private of(account: string): Counters {
    let counters = this.byAccount.get(account);
    if (!counters) {
      counters = new Counters();
      this.byAccount.set(account, counters);
    }
    return counters;
  }
}
