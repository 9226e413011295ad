import { Registry } from 'prom-client';
import { expect, it } from 'vitest';
import { budgetMetrics } from '../../src/metrics/budget-metrics.js';

it('exports the waits for the budget and the 429s as counters without a source label, read at scrape time', async () => {
  const registry = new Registry();
  const tally = { waitSeconds: 0, rateLimited: 0 };
  budgetMetrics(registry, tally);
  tally.waitSeconds = 1.5;
  tally.rateLimited = 2;
  let text = await registry.metrics();
  expect(text).toContain('feedsync_budget_wait_seconds_total 1.5');
  expect(text).toContain('feedsync_rate_limited_total 2');
  tally.rateLimited = 5;
  text = await registry.metrics();
  expect(text).toContain('feedsync_rate_limited_total 5');
  expect(text).not.toContain('source=');
});
