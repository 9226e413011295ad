import { afterAll, beforeAll, expect, it } from 'vitest';
import { ServiceClient } from '../../src/api/client.js';
import { createTransport, type RequestFn } from '../../src/api/http.js';
import type { Simulator } from '../../src/simulator/index.js';
import { startTestSimulator, TEST_API_KEY } from '../support/simulator.js';

// The simulator's clock is the test's: a retry's wait moves it on instead of sleeping,
// so the budget's window turns exactly when the client has waited out Retry-After.
let clock = Date.UTC(2026, 0, 1);
let sim: Simulator;
beforeAll(async () => {
  sim = await startTestSimulator({ rateLimit: 1, now: () => clock });
});
afterAll(() => sim.close());

it('send retries a 429 after Retry-After with the same Idempotency-Key, and the email goes once', async () => {
  const transport = createTransport({
    baseUrl: sim.baseUrl,
    apiKey: TEST_API_KEY,
    timeoutMs: 5_000,
    maxResponseBytes: 1e6,
  });
  const sent: { status: number; key: string | undefined }[] = [];
  const recorded: RequestFn = async (req) => {
    try {
      const res = await transport.request(req);
      if (req.path === '/emails') sent.push({ status: res.status, key: req.headers?.['idempotency-key'] });
      return res;
    } catch (err) {
      if (req.path === '/emails')
        sent.push({ status: (err as { status: number }).status, key: req.headers?.['idempotency-key'] });
      throw err;
    }
  };
  const client = new ServiceClient({
    baseUrl: sim.baseUrl,
    apiKey: TEST_API_KEY,
    request: recorded,
    retry: { maxRetries: 3, maxRetryWaitMs: 5_000 },
    retryDeps: {
      random: () => 0,
      sleep: async (ms) => {
        clock += ms;
      },
    },
  });
  try {
    // The application's own request spends this second's budget of one.
    await client.listWebhooks();
    const result = await client.sendEmail({
      from: 'app@example.test',
      to: ['delivered@example.test'],
      subject: 'once',
      html: '<p>once</p>',
    });
    expect(sent.map((s) => s.status)).toEqual([429, 200]);
    expect(sent[1]!.key).toBe(sent[0]!.key);
    expect(sent[0]!.key).toBe(result.idempotencyKey);
    expect(sim.stats().emails_sent).toBe(1);
    expect(sim.stats().rate_limited).toBe(1);
  } finally {
    await client.close();
    await transport.close();
  }
});
