import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../src/api/client.js';
import { CONFIG_DEFAULTS } from '../../src/config/config-defaults.js';
import { ApiError, AuthError } from '../../src/errors.js';
import { verifyWebhookSignature } from '../../src/index.js';
import { DEFAULT_FAULTS } from '../../src/simulator/index.js';
import { EMAIL } from '../simulator/http.js';
import { type Receiver, startReceiver } from '../simulator/receiver.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';

// The project's own API client, end to end against the simulator: the two must agree.
const sim = useSimulator();
let client: ServiceClient;
let receiver: Receiver;
const waits: number[] = [];

beforeAll(async () => {
  receiver = await startReceiver();
  client = new ServiceClient({
    baseUrl: sim().baseUrl,
    apiKey: TEST_API_KEY,
    timeoutMs: 5_000,
    retry: { maxRetries: 3, maxRetryWaitMs: 60_000 },
    retryDeps: {
      sleep: async (ms) => {
        waits.push(ms);
        // The simulator's faults are drawn per request; lift them so the retry succeeds.
        sim().setFaults({ ...DEFAULT_FAULTS });
      },
    },
  });
});
afterAll(async () => {
  await client.close();
  await receiver.close();
});

describe('ServiceClient against the simulator', () => {
  it('sends once per idempotency key', async () => {
    const a = await client.sendEmail({ ...EMAIL, to: ['a@example.test'] }, { idempotencyKey: 'same' });
    const b = await client.sendEmail({ ...EMAIL, to: ['a@example.test'] }, { idempotencyKey: 'same' });
    expect(b.id).toBe(a.id);
    expect(sim().stats().emails_sent).toBe(1);
    await expect(
      client.sendEmail({ ...EMAIL, to: ['b@example.test'] }, { idempotencyKey: 'same' }),
    ).rejects.toMatchObject({ status: 409, serviceCode: 'idempotency_conflict' });
  });

  it('pages the feed', async () => {
    const page = await client.eventsPage({ limit: 1 });
    const body = page.body as { data: { id: string }[]; next_after: string };
    expect(body.data).toHaveLength(1);
    const next = (await client.eventsPage({ after: body.next_after, type: ['delivered'] }))
      .body as typeof body;
    expect(next.data.map((e) => e.id)).toEqual([next.next_after]);
  });

  it('creates, lists, tests and deletes a webhook', async () => {
    const wh = await client.createWebhook({ url: receiver.url, events: ['*'] });
    expect(wh.signing_secret).toMatch(/^whsec_/);
    expect((await client.listWebhooks()).map((w) => w.id)).toContain(wh.id);
    await client.testWebhook(wh.id);
    const [got] = await receiver.waitFor(1);
    expect(
      verifyWebhookSignature(got!.body, got!.headers['service-signature'] as string, wh.signing_secret),
    ).toBe(true);
    await client.deleteWebhook(wh.id);
    expect((await client.listWebhooks()).map((w) => w.id)).not.toContain(wh.id);
    await expect(client.deleteWebhook(wh.id)).rejects.toMatchObject({
      status: 404,
      serviceCode: 'webhook_not_found',
    });
  });

  it('retries a 429 no sooner than its Retry-After', async () => {
    sim().setFaults({ rate429: 1, retryAfterSec: 3 });
    waits.length = 0;
    await client.listWebhooks();
    expect(waits).toHaveLength(1);
    expect(waits[0]).toBeGreaterThanOrEqual(3_000);
  });

  it('a rejected key is an AuthError', async () => {
    const bad = new ServiceClient({ baseUrl: sim().baseUrl, apiKey: 'not-a-key' });
    try {
      await expect(bad.listWebhooks()).rejects.toBeInstanceOf(AuthError);
    } finally {
      await bad.close();
    }
  });

  it('a refused page is an ApiError with the service code', async () => {
    await expect(client.eventsPage({ after: 'evt_nope' })).rejects.toMatchObject({
      status: 400,
      serviceCode: 'unknown_event_id',
    });
    await expect(client.eventsPage({ limit: 5000 })).rejects.toBeInstanceOf(ApiError);
  });
});

describe('ServiceClient defaults', () => {
  it('refuses a page over the configuration’s default response limit when none is given', async () => {
    // One byte past FEED_MAX_RESPONSE_BYTES's default: a client built without the option
    // must refuse what a configured worker refuses.
    const body = Buffer.alloc(CONFIG_DEFAULTS.FEED_MAX_RESPONSE_BYTES + 1, 0x20);
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const plain = new ServiceClient({ baseUrl: `http://127.0.0.1:${port}/api`, apiKey: TEST_API_KEY });
    try {
      await expect(plain.eventsPage({})).rejects.toMatchObject({ code: 'RESPONSE_TOO_LARGE' });
    } finally {
      await plain.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
