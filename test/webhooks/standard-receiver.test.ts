import { Webhook as SvixWebhook } from 'svix';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../src/api/client.js';
import { receiverCheck } from '../../src/doctor/feed-check.js';
import { ConfigError } from '../../src/errors.js';
import type { Simulator } from '../../src/simulator/index.js';
import { signWebhookPayload } from '../../src/webhooks/signature.js';
import { startWebhookService } from '../../src/webhooks/webhook-service.js';
import { testConfig } from '../support/config.js';
import { uniqueSchema } from '../support/postgres.js';
import { freePort, waitFor } from '../support/processes.js';
import { queuePrefixName } from '../support/queues.js';
import { startTestSimulator, TEST_API_KEY } from '../support/simulator.js';
import {
  captureLogger,
  count,
  emailEvent,
  jobIds,
  send,
  startTestReceiver,
  type TestReceiver,
} from './helpers.js';

const schema = uniqueSchema('wh_standard');
const prefix = queuePrefixName('wh-standard');
const OLD = `whsec_${Buffer.from('standard receiver old key').toString('base64')}`;
const NEW = `whsec_${Buffer.from('standard receiver new key').toString('base64')}`;
const logs = captureLogger();
let rx: TestReceiver;
let sim: Simulator;
let client: ServiceClient;

beforeAll(async () => {
  sim = await startTestSimulator({ webhookScheme: 'standard', webhookBodyWithoutId: true });
  client = new ServiceClient({ baseUrl: sim.baseUrl, apiKey: TEST_API_KEY });
  const config = testConfig(
    { schema, prefix },
    { WEBHOOK_SCHEME: 'standard', WEBHOOK_SECRET: `${OLD},${NEW}` },
  );
  rx = await startTestReceiver(config, logs.logger, { connections: 4, schema, prefix });
});
afterAll(async () => {
  await rx?.close();
  await client?.close();
  await sim?.close();
});

/** Posts a body signed by the svix package, as a sender through Svix does. */
function svixDeliver(body: string, id: string, secret = NEW, t = Math.floor(Date.now() / 1000)) {
  const signature = new SvixWebhook(secret).sign(id, new Date(t * 1000), body);
  return send(rx.pool, {
    body,
    headers: { 'svix-id': id, 'svix-timestamp': String(t), 'svix-signature': signature },
  });
}

describe('serve-webhooks with WEBHOOK_SCHEME=standard', () => {
  it('stores a body without id under its webhook-id, once however often it is delivered', async () => {
    const { id: _none, ...body } = emailEvent('email.delivered');
    const text = JSON.stringify(body);
    const first = await svixDeliver(text, 'msg_std_receiver_1');
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ id: 'msg_std_receiver_1', stored: true, duplicate: false });
    // The sender's retry: the same id, a new timestamp and signature.
    const retry = await svixDeliver(text, 'msg_std_receiver_1', OLD);
    expect(retry.body).toMatchObject({ id: 'msg_std_receiver_1', stored: true, duplicate: true });
    expect(await count(rx.store, 'events', `id = 'msg_std_receiver_1'`)).toBe(1);
    await waitFor(async () => (await jobIds(prefix, 'email-events')).includes('default/msg_std_receiver_1'), {
      timeoutMs: 10_000,
      what: 'the job of the delivery',
    });
  });

  it("keeps a body's own id over the webhook-id", async () => {
    const event = emailEvent('email.sent');
    const res = await svixDeliver(JSON.stringify(event), 'msg_std_receiver_2');
    expect(res.body).toMatchObject({ id: event.id, stored: true });
  });

  it('refuses Service-Signature deliveries, stale ones both ways and unknown keys with 401', async () => {
    const text = JSON.stringify(emailEvent());
    const service = await send(rx.pool, {
      body: text,
      headers: { 'service-signature': signWebhookPayload(text, NEW) },
    });
    expect(service.status).toBe(401);
    const now = Math.floor(Date.now() / 1000);
    expect((await svixDeliver(text, 'msg_old', NEW, now - 400)).status).toBe(401);
    expect((await svixDeliver(text, 'msg_new', NEW, now + 400)).status).toBe(401);
    const other = `whsec_${Buffer.from('not ours').toString('base64')}`;
    expect((await svixDeliver(text, 'msg_other', other)).status).toBe(401);
    expect(await count(rx.store, 'events', `id IN ('msg_old', 'msg_new', 'msg_other')`)).toBe(0);
  });

  it("stores the simulator's Standard Webhooks deliveries (bodies without id) under the feed's ids", async () => {
    // The registration's secret exists only once it is made: made first, for a port taken now.
    const port = await freePort();
    const hook = await client.createWebhook({ url: `http://127.0.0.1:${port}/webhooks`, events: ['*'] });
    const config = testConfig(
      { schema, prefix },
      { WEBHOOK_SCHEME: 'standard', WEBHOOK_SECRET: hook.signing_secret, FEED_SOURCE: 'sim' },
    );
    const service = await startWebhookService(config, { logger: logs.logger, port, host: '127.0.0.1' });
    try {
      for (let i = 0; i < 3; i++) {
        await client.sendEmail({
          from: 'app@example.com',
          to: ['someone@example.com'],
          subject: `s${i}`,
          html: 'x',
        });
      }
      const page = await client.eventsPage({ limit: 1_000 });
      const feedIds = (page.body as { data: { id: string }[] }).data.map((e) => e.id).sort();
      expect(feedIds.length).toBeGreaterThan(0);
      await waitFor(() => sim.stats().webhook_deliveries.succeeded >= feedIds.length, {
        timeoutMs: 20_000,
        what: 'every delivery accepted',
      });
      const { rows } = await rx.store.pool.query<{ id: string }>(
        `SELECT id FROM "${schema}".events WHERE source = 'sim' ORDER BY id`,
      );
      expect(rows.map((r) => r.id)).toEqual(feedIds);
      expect(sim.stats().webhook_deliveries.failed).toBe(0);
    } finally {
      await service.close();
    }
  });

  it('refuses to start with a secret that is no whsec_ key (exit 2), naming no secret', async () => {
    const config = testConfig(
      { schema, prefix },
      { WEBHOOK_SCHEME: 'standard', WEBHOOK_SECRET: `${NEW},whsec_not-a-key!` },
    );
    const err = await startWebhookService(config, { logger: logs.logger, port: 0 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).exitCode).toBe(2);
    expect((err as Error).message).toContain('value 2 of 2');
    expect((err as Error).message).not.toContain('not-a-key');
  });

  it('doctor --receiver fails on such a secret, and names the scheme when the secrets are keys', () => {
    const bad = testConfig(
      { schema, prefix },
      { WEBHOOK_SCHEME: 'standard', WEBHOOK_SECRET: 'whsec_not-a-key!' },
    );
    expect(receiverCheck(bad)).toMatchObject({ status: 'fail' });
    expect(JSON.stringify(receiverCheck(bad))).not.toContain('not-a-key');
    const good = testConfig(
      { schema, prefix },
      { WEBHOOK_SCHEME: 'standard', WEBHOOK_SECRET: `${OLD},${NEW}` },
    );
    expect(receiverCheck(good)).toMatchObject({ status: 'ok' });
  });

  it('refuses an unknown WEBHOOK_SCHEME (exit 2)', () => {
    expect(() => testConfig({ schema, prefix }, { WEBHOOK_SCHEME: 'svix' })).toThrow(/WEBHOOK_SCHEME/);
  });
});
