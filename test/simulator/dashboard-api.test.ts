import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EMAILS_KEPT } from '../../src/simulator/emails.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import { call, EMAIL } from './http.js';
import { type Receiver, startReceiver } from './receiver.js';

// The JSON the dashboard reads; the page itself is driven in dashboard.test.ts.
const sim = useSimulator({ backlog: 3 });
let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(() => receiver.close());

const get = (path: string) => call(sim(), 'GET', path, { key: null });
const mine = () => sim().account(TEST_API_KEY).id;

describe('the dashboard’s endpoints', () => {
  it('lists the accounts with what the picker shows, never a key', async () => {
    sim().account('sim_live_second_account_99');
    const res = await get('/_sim/accounts');
    expect(res.status).toBe(200);
    expect(res.body.data).toContainEqual({
      id: mine(),
      key_hint: 'sim_test_…cdef',
      default: true,
      events: 3,
      emails_sent: 0,
      webhooks: 0,
      last_activity_at: null,
    });
    expect(res.body.data).toHaveLength(2);
    // The simulator's clock, which the page compares last_activity_at and its own choice with.
    expect(Math.abs(Date.parse(res.body.now) - Date.now())).toBeLessThan(60_000);
    expect(JSON.stringify(res.body)).not.toContain('second_account');
  });

  it("dates an account's last change through the API, not its reads", async () => {
    const key = 'sim_test_activity_account_03';
    const activity = async () =>
      (await get('/_sim/accounts')).body.data.find((a: { id: string }) => a.id === sim().account(key).id)
        ?.last_activity_at;
    expect((await call(sim(), 'GET', '/api/events', { key })).status).toBe(200);
    expect(await activity()).toBeNull();
    const refused = await call(sim(), 'POST', '/api/emails', { key, body: {} });
    expect(refused.status).toBe(400);
    expect(await activity()).toBeNull();
    await call(sim(), 'POST', '/api/emails', { key, body: { ...EMAIL, to: ['a@x.test'] } });
    expect(Date.parse(await activity())).toBeGreaterThan(Date.now() - 60_000);
  });

  it('keeps the last 50 emails, newest first, each with its events', async () => {
    for (let i = 1; i <= EMAILS_KEPT + 2; i++) {
      await call(sim(), 'POST', '/api/emails', {
        body: { ...EMAIL, subject: `n${i}`, to: ['complained@x.test'] },
      });
    }
    const res = await get(`/_sim/accounts/${mine()}/emails`);
    expect(res.body.data).toHaveLength(EMAILS_KEPT);
    const [newest] = res.body.data;
    expect(newest).toMatchObject({
      subject: `n${EMAILS_KEPT + 2}`,
      to: ['complained@x.test'],
      from: EMAIL.from,
    });
    expect(newest.events.map((e: { type: string }) => e.type)).toEqual([
      'email.sent',
      'email.delivered',
      'email.complained',
    ]);
    expect(res.body.data.at(-1).subject).toBe('n3');
  });

  it('answers the newest feed events first, with the feed’s size', async () => {
    const res = await get(`/_sim/accounts/${mine()}/events?limit=2`);
    const total = sim().account(TEST_API_KEY).stats().events;
    expect(res.body.total).toBe(total);
    expect(res.body.data.map((e: { id: string }) => e.id)).toEqual([
      `evt_${String(total).padStart(12, '0')}`,
      `evt_${String(total - 1).padStart(12, '0')}`,
    ]);
    for (const limit of ['0', '501', 'x']) {
      expect((await get(`/_sim/accounts/${mine()}/events?limit=${limit}`)).body.error.code).toBe(
        'invalid_limit',
      );
    }
    expect((await get('/_sim/accounts/acct_nope/events')).status).toBe(404);
  });

  it('lists webhooks with their deliveries and sends a test without a key', async () => {
    const reg = await call(sim(), 'POST', '/api/webhooks', { body: { url: receiver.url, events: ['*'] } });
    const test = await call(sim(), 'POST', `/_sim/webhooks/${reg.body.id}/test`, { key: null });
    expect(test.status).toBe(200);
    expect(test.body.delivery).toMatchObject({ event_type: 'webhook.test', status: 'succeeded' });
    const res = await get(`/_sim/accounts/${mine()}/webhooks`);
    expect(res.body.data).toHaveLength(1);
    expect(res.body.data[0]).not.toHaveProperty('signing_secret');
    expect(res.body.data[0].deliveries[0]).toMatchObject({
      id: test.body.delivery.id,
      attempts: [{ status: 200 }],
    });
    expect((await call(sim(), 'POST', '/_sim/webhooks/wh_nope/test', { key: null })).status).toBe(404);
  });

  it('answers what feedsync will hold in contact_status and suppressions, from the events a person made', async () => {
    const other = 'sim_test_records_account_7';
    const id = sim().account(other).id;
    await call(sim(), 'POST', '/api/emails', {
      key: other,
      body: { ...EMAIL, to: ['Bounced@Example.test', 'complained@example.test', 'delivered@example.test'] },
    });
    const contact = (type: string, email: string) =>
      call(sim(), 'POST', '/_sim/contacts', { key: null, body: { key: other, type, email } });
    await contact('contact.unsubscribed', 'gone@example.test');
    await contact('contact.unsubscribed', 'back@example.test');
    await contact('contact.subscribed', 'back@example.test');
    // An unsubscribe after the bounce: both reasons stand, each on its own row.
    await contact('contact.unsubscribed', 'bounced@example.test');
    const res = await get(`/_sim/accounts/${id}/records`);
    expect(res.status).toBe(200);
    const pairs = (rows: { [k: string]: string }[], key: string, value: string) =>
      rows.map((r) => [r[key], r[value]]);
    expect(pairs(res.body.suppressions, 'address', 'reason')).toEqual([
      ['bounced@example.test', 'bounced'],
      ['bounced@example.test', 'unsubscribed'],
      ['complained@example.test', 'complained'],
      ['gone@example.test', 'unsubscribed'],
    ]);
    expect(pairs(res.body.contacts, 'email', 'status')).toEqual([
      ['back@example.test', 'subscribed'],
      ['bounced@example.test', 'unsubscribed'],
      ['gone@example.test', 'unsubscribed'],
    ]);
    for (const s of res.body.suppressions) expect(s.event_id).toMatch(/^evt_/);
  });
});
