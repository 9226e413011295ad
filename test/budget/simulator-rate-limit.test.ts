import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Simulator } from '../../src/simulator/index.js';
import { call } from '../simulator/http.js';
import { CLI, spawnNode } from '../support/processes.js';
import { startTestSimulator, TEST_API_KEY } from '../support/simulator.js';

let clock = Date.UTC(2026, 0, 1, 0, 0, 0, 250);
let sim: Simulator;
beforeAll(async () => {
  sim = await startTestSimulator({ rateLimit: 3, now: () => clock });
});
afterAll(() => sim.close());

it('--rate-limit: N requests a second per account over every endpoint, sends included, stated in RateLimit-*; then 429 + Retry-After', async () => {
  const email = { from: 'a@example.test', to: 'delivered@example.test', subject: 's', html: '<p>h</p>' };
  const answers = [
    await call(sim, 'GET', '/api/events'),
    await call(sim, 'POST', '/api/emails', { body: email }),
    await call(sim, 'GET', '/api/webhooks'),
    await call(sim, 'POST', '/api/emails', { body: email }),
  ];
  expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 429]);
  expect(answers.map((a) => a.headers['ratelimit-remaining'])).toEqual(['2', '1', '0', '0']);
  for (const a of answers)
    expect([a.headers['ratelimit-limit'], a.headers['ratelimit-reset']]).toEqual(['3', '1']);
  expect(answers[3]!.headers['retry-after']).toBe('1');
  // Another key is another account, with a budget of its own.
  expect((await call(sim, 'GET', '/api/events', { key: 'sim_test_another_account' })).status).toBe(200);
  // The next second, a new window.
  clock += 1000;
  expect((await call(sim, 'POST', '/api/emails', { body: email })).status).toBe(200);
  const stats = sim.stats();
  expect(stats.rate_limited).toBe(1);
  expect(stats.emails_sent).toBe(2);
  expect(Object.values(stats.accounts).find((a) => a.default)?.rate_limited).toBe(1);
  expect(JSON.stringify(stats)).not.toContain(TEST_API_KEY);
});

it('feedsync simulator --rate-limit takes a whole number of at least 1 (exit 2 otherwise) and says so in --help', async () => {
  const bad = await spawnNode([CLI, 'simulator', '--port', '0', '--rate-limit', '0'], {}).waitExit(10_000);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toContain('--rate-limit');
  const help = await spawnNode([CLI, 'simulator', '--help'], {}).waitExit(10_000);
  expect(help.stdout).toContain('--rate-limit <n>');
});
