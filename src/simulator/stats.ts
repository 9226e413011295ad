import type { SimulatorStats } from './types.js';

/** Counters behind `GET /_sim/stats`. */
export class Stats {
  private readonly requests = new Map<string, Map<number, number>>();
  private readonly deliveries = { attempted: 0, succeeded: 0, failed: 0 };

  /** One answered request, by route name (`GET /api/events`) and status. */
  request(route: string, status: number): void {
    const byStatus = this.requests.get(route) ?? new Map<number, number>();
    byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
    this.requests.set(route, byStatus);
  }

  /** One webhook delivery attempt. */
  delivery(ok: boolean): void {
    this.deliveries.attempted += 1;
    if (ok) this.deliveries.succeeded += 1;
    else this.deliveries.failed += 1;
  }

  snapshot(emailsSent: number, events: number): SimulatorStats {
    const requests: SimulatorStats['requests'] = {};
    for (const [route, byStatus] of this.requests) {
      requests[route] = Object.fromEntries([...byStatus].map(([status, n]) => [String(status), n]));
    }
    return { emails_sent: emailsSent, requests, webhook_deliveries: { ...this.deliveries }, events };
  }
}
