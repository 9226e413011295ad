import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { verifyWebhookSignature } from '../../src/index.js';
import { RETRY_SCHEDULE_MS, type Simulator } from '../../src/simulator/index.js';
import { startTestSimulator, useSimulator } from '../support/simulator.js';
import { call, EMAIL } from './http.js';
import { type Receiver, startReceiver } from './receiver.js';

const sim = useSimulator();
let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(() => receiver.close());

const created: string[] = [];
afterEach(async () => {
  for (const id of created.splice(0)) await call(sim(), 'DELETE', `/api/webhooks/${id}`);
  receiver.received.length = 0;
  receiver.plan([]);
});

async function register(events: string[], url = receiver.url) {
  const res = await call(sim(), 'POST', '/api/webhooks', { body: { url, events } });
  expect(res.status).toBe(200);
  created.push(res.body.id);
  return res.body as {
    id: string;
    url: string;
    events: string[];
    created_at: string;
    signing_secret: string;
  };
}

function deliveries(s: Simulator, id: string, base = '/api') {
  return call(s, 'GET', `${base}/webhooks/${id}/deliveries`);
}

describe('registrations', () => {
  it('create answers the registration with its secret; list and get never show it', async () => {
    const wh = await register(['email.delivered']);
    expect(wh).toEqual({
      id: expect.stringMatching(/^wh_/),
      url: receiver.url,
      events: ['email.delivered'],
      created_at: expect.any(String),
      signing_secret: expect.stringMatching(/^whsec_[0-9a-f]+$/),
    });
    const list = await call(sim(), 'GET', '/api/webhooks');
    expect(list.body.data).toEqual([
      { id: wh.id, url: wh.url, events: wh.events, created_at: wh.created_at },
    ]);
    const one = await call(sim(), 'GET', `/api/webhooks/${wh.id}`);
    expect(one.body).toEqual(list.body.data[0]);
    expect(JSON.stringify([list.body, one.body])).not.toContain(wh.signing_secret);
  });

  it('delete removes it; a second delete is 404', async () => {
    const wh = await register(['*']);
    expect((await call(sim(), 'DELETE', `/api/webhooks/${wh.id}`)).body).toEqual({
      id: wh.id,
      deleted: true,
    });
    const again = await call(sim(), 'DELETE', `/api/webhooks/${wh.id}`);
    expect(again.status).toBe(404);
    expect(again.body.error.code).toBe('webhook_not_found');
  });

  it.each([
    ['GET', '/api/webhooks/wh_nope'],
    ['DELETE', '/api/webhooks/wh_nope'],
    ['POST', '/api/webhooks/wh_nope/test'],
    ['GET', '/api/webhooks/wh_nope/deliveries'],
    ['POST', '/api/webhooks/wh_nope/deliveries/dlv_1/resend'],
    ['GET', '/_sim/webhooks/wh_nope/deliveries'],
    ['GET', '/api/webhooks/%E0%A4%A/deliveries'],
  ])('%s %s: 404 webhook_not_found', async (method, path) => {
    const res = await call(sim(), method, path);
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('webhook_not_found');
  });

  it.each([
    ['no content type', { body: '{"url":"http://x.test","events":["*"]}' }, 415, 'unsupported_media_type'],
    [
      'form content type',
      { body: 'url=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } },
      415,
      'unsupported_media_type',
    ],
    ['bad JSON', { body: '{', headers: { 'content-type': 'application/json' } }, 400, 'invalid_json'],
    ['missing url', { body: { events: ['*'] } }, 400, 'missing_field'],
    ['missing events', { body: { url: 'http://x.test' } }, 400, 'missing_field'],
    ['empty events', { body: { url: 'http://x.test', events: [] } }, 400, 'invalid_field'],
    ['a short type name', { body: { url: 'http://x.test', events: ['delivered'] } }, 400, 'invalid_field'],
    ['a relative url', { body: { url: '/hooks', events: ['*'] } }, 400, 'invalid_field'],
    ['an ftp url', { body: { url: 'ftp://x.test/', events: ['*'] } }, 400, 'invalid_field'],
    ['events not a list', { body: { url: 'http://x.test', events: '*' } }, 400, 'invalid_field'],
  ])('refuses %s', async (_name, opts, status, code) => {
    const res = await call(sim(), 'POST', '/api/webhooks', opts);
    expect(res.status).toBe(status);
    expect(res.body).toEqual({ error: { code, message: expect.any(String) } });
  });

  it('charset in the content type is fine', async () => {
    const res = await call(sim(), 'POST', '/api/webhooks', {
      body: JSON.stringify({ url: receiver.url, events: ['*'] }),
      headers: { 'content-type': 'Application/JSON; charset=utf-8' },
    });
    expect(res.status).toBe(200);
    created.push(res.body.id);
  });
});

describe('deliveries', () => {
  it('POST /webhooks/{id}/test posts a correctly signed webhook.test', async () => {
    const wh = await register(['email.bounced']);
    const res = await call(sim(), 'POST', `/api/webhooks/${wh.id}/test`);
    expect(res.status).toBe(200);
    expect(res.body.event).toMatchObject({ type: 'webhook.test', data: { webhook_id: wh.id } });
    expect(res.body.delivery).toMatchObject({ status: 'succeeded', attempts: [{ status: 200 }] });

    const [got] = await receiver.waitFor(1);
    expect(got!.headers['content-type']).toBe('application/json');
    const header = got!.headers['service-signature'] as string;
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(verifyWebhookSignature(got!.body, header, wh.signing_secret)).toBe(true);
    expect(verifyWebhookSignature(got!.body, header, 'whsec_other')).toBe(false);
    expect(JSON.parse(got!.body.toString())).toEqual(res.body.event);
  });

  it('an email fans out only the types a registration asked for', async () => {
    const wh = await register(['email.sent', 'email.bounced']);
    const all = await register(['*']);
    await call(sim(), 'POST', '/api/emails', { body: { ...EMAIL, to: ['bounced@example.test'] } });
    const got = await receiver.waitFor(4);
    const bySecret = (secret: string) =>
      got
        .filter((r) => verifyWebhookSignature(r.body, r.headers['service-signature'] as string, secret))
        .map((r) => JSON.parse(r.body.toString()).type)
        .sort();
    await vi.waitFor(async () => expect((await deliveries(sim(), all.id)).body.data).toHaveLength(2));
    expect(bySecret(wh.signing_secret)).toEqual(['email.bounced', 'email.sent']);
    expect(bySecret(all.signing_secret)).toEqual(['email.bounced', 'email.sent']);
    expect(got).toHaveLength(4);
  });

  it('a failing receiver is retried on the growing schedule until it accepts', async () => {
    const statsBefore = sim().stats().webhook_deliveries;
    receiver.plan([500, 503]);
    const wh = await register(['*']);
    const res = await call(sim(), 'POST', `/api/webhooks/${wh.id}/test`);
    expect(res.body.delivery).toMatchObject({ status: 'pending', attempts: [{ status: 500 }] });
    expect(res.body.delivery.next_attempt_at).not.toBeNull();

    const got = await receiver.waitFor(3);
    expect(new Set(got.map((r) => r.body.toString())).size).toBe(1);
    for (const r of got) {
      expect(
        verifyWebhookSignature(r.body, r.headers['service-signature'] as string, wh.signing_secret),
      ).toBe(true);
    }
    await vi.waitFor(async () => {
      const [d] = (await deliveries(sim(), wh.id)).body.data;
      expect(d).toMatchObject({ status: 'succeeded', next_attempt_at: null });
      expect(d.attempts.map((a: { status: number }) => a.status)).toEqual([500, 503, 200]);
    });
    const after = sim().stats().webhook_deliveries;
    expect(after.attempted - statsBefore.attempted).toBe(3);
    expect(after.failed - statsBefore.failed).toBe(2);
    expect(after.succeeded - statsBefore.succeeded).toBe(1);
  });

  it('an unreachable receiver: a network error is an attempt with no status', async () => {
    const gone = await startReceiver();
    await gone.close();
    const wh = await register(['*'], gone.url);
    const res = await call(sim(), 'POST', `/api/webhooks/${wh.id}/test`);
    expect(res.body.delivery.attempts[0]).toMatchObject({ status: null, error: expect.any(String) });
  });

  it('gives up after the whole schedule (about a day) has failed', async () => {
    const total = RETRY_SCHEDULE_MS.reduce((a, b) => a + b, 0);
    expect(total / 3_600_000).toBeGreaterThan(20);
    expect(total / 3_600_000).toBeLessThan(30);

    const quick = await startTestSimulator({ timeScale: 0.000001 });
    const failing = await startReceiver();
    try {
      failing.plan(Array(RETRY_SCHEDULE_MS.length).fill(500));
      const created = await call(quick, 'POST', '/api/webhooks', {
        body: { url: failing.url, events: ['*'] },
      });
      await call(quick, 'POST', `/api/webhooks/${created.body.id}/test`);
      await failing.waitFor(RETRY_SCHEDULE_MS.length);
      await vi.waitFor(async () => {
        const [d] = (await deliveries(quick, created.body.id)).body.data;
        expect(d).toMatchObject({ status: 'failed', next_attempt_at: null });
        expect(d.attempts).toHaveLength(RETRY_SCHEDULE_MS.length);
      });
    } finally {
      await quick.close();
      await failing.close();
    }
  });

  it('lists the last 50 deliveries, newest first, under /api and /_sim', async () => {
    const wh = await register(['contact.subscribed']);
    for (let i = 0; i < 55; i++) sim().emitContactEvent('contact.subscribed', `c${i}@example.test`);
    await receiver.waitFor(55);
    const api = (await deliveries(sim(), wh.id)).body.data;
    const control = (await deliveries(sim(), wh.id, '/_sim')).body.data;
    expect(api).toHaveLength(50);
    expect(control.map((d: { id: string }) => d.id)).toEqual(api.map((d: { id: string }) => d.id));
    expect(api[0].id > api[49].id).toBe(true);
    expect(api[0]).toMatchObject({ webhook_id: wh.id, event_type: 'contact.subscribed' });
  });

  it('resends a delivery as a new one with the same event', async () => {
    const wh = await register(['*']);
    const first = await call(sim(), 'POST', `/api/webhooks/${wh.id}/test`);
    const id = first.body.delivery.id;
    const viaApi = await call(sim(), 'POST', `/api/webhooks/${wh.id}/deliveries/${id}/resend`);
    expect(viaApi.status).toBe(200);
    expect(viaApi.body).toMatchObject({ event_id: first.body.event.id, status: 'succeeded' });
    expect(viaApi.body.id).not.toBe(id);
    const viaSim = await call(sim(), 'POST', `/_sim/webhooks/${wh.id}/deliveries/${id}/resend`, {
      key: null,
    });
    expect(viaSim.status).toBe(200);
    const got = await receiver.waitFor(3);
    expect(new Set(got.map((r) => JSON.parse(r.body.toString()).id))).toEqual(new Set([first.body.event.id]));

    const missing = await call(sim(), 'POST', `/api/webhooks/${wh.id}/deliveries/dlv_nope/resend`);
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('delivery_not_found');
  });

  it('close() returns while a retry is pending', async () => {
    const quick = await startTestSimulator({ timeScale: 1 });
    const failing = await startReceiver();
    try {
      failing.plan([500]);
      const created = await call(quick, 'POST', '/api/webhooks', {
        body: { url: failing.url, events: ['*'] },
      });
      const res = await call(quick, 'POST', `/api/webhooks/${created.body.id}/test`);
      expect(res.body.delivery.status).toBe('pending');
    } finally {
      await quick.close();
      await failing.close();
    }
    expect(failing.received).toHaveLength(1);
  });
});
