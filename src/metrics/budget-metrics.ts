import { Counter, type Registry } from 'prom-client';
import type { BudgetTally } from '../budget/request-budgets.js';

/**
 * `feedsync_budget_wait_seconds_total` and `feedsync_rate_limited_total`: read from the
 * process's request budgets at scrape time, without a `source` label (one pair of series
 * per replica, however many accounts it serves).
 */
export function budgetMetrics(registry: Registry, tally: BudgetTally): void {
  const counterOf = (name: string, help: string, read: () => number): void => {
    let seen = 0;
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        const now = read();
        this.inc(now - seen);
        seen = now;
      },
    });
  };
  counterOf(
    'feedsync_budget_wait_seconds_total',
    "Seconds requests to the service waited for their account's request budget (FEED_RATE_SHARE, FEED_MAX_REQUESTS_PER_SECOND).",
    () => tally.waitSeconds,
  );
  counterOf(
    'feedsync_rate_limited_total',
    'Answers of 429 (the service refused a request for its rate limit), sends included.',
    () => tally.rateLimited,
  );
}
