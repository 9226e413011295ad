import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceEvent } from '../../src/api/types.js';
import { MAX_ACCOUNTS } from '../../src/simulator/accounts.js';
import { startSimulator } from '../../src/simulator/index.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import { call, EMAIL } from './http.js';
import { type Receiver, startReceiver } from './receiver.js';

// Every account starts with the same backlog: the same ids, each account's own content.
const BACKLOG = 12;
const sim = useSimulator({ backlog: BACKLOG });
const KEY_A = 'sim_test_account_a_0001';
const KEY_B = 'sim_live_account_b_0002';

let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(() => receiver.close());

async function feed(key: string): Promise<ServiceEvent[]> {
  const res = await call(sim(), 'GET', '/api/events?limit=1000', { key });
  expect(res.status).toBe(200);
  return res.body.data;
}

describe('one account per API key', () => {
  it('gives each key its own feed, whose ids follow the same sequence as every other', async () => {
    const a = await call(sim(), 'POST', '/api/emails', {
      key: KEY_A,
      body: { ...EMAIL, to: ['a@example.test'] },
    });
    const b = await call(sim(), 'POST', '/api/emails', {
      key: KEY_B,
      body: { ...EMAIL, to: ['b@example.test'] },
    });
    expect(a.body.id).not.toBe(b.body.id);

    const [feedA, feedB, feedDefault] = await Promise.all([feed(KEY_A), feed(KEY_B), feed(TEST_API_KEY)]);
    // The backlog plus email.sent and email.delivered of the one email each sent.
    expect(feedA).toHaveLength(BACKLOG + 2);
    expect(feedB).toHaveLength(BACKLOG + 2);
    expect(feedA.map((e) => e.id)).toEqual(feedB.map((e) => e.id));
    expect(feedA[BACKLOG]!.id).toBe('evt_000000000013');
    expect(feedA[BACKLOG]!.data).toMatchObject({ email_id: a.body.id, to: ['a@example.test'] });
    expect(feedB[BACKLOG]!.data).toMatchObject({ email_id: b.body.id, to: ['b@example.test'] });
    // Neither email reached the default account.
    expect(feedDefault.map((e) => e.data.email_id)).not.toContain(a.body.id);
    expect(feedDefault.map((e) => e.data.email_id)).not.toContain(b.body.id);
  });

  it('generates the same backlog ids with content of each account, the default one as before', async () => {
    const [a, b, d] = await Promise.all([feed(KEY_A), feed(KEY_B), feed(TEST_API_KEY)]);
    const idA = sim().account(KEY_A).id;
    expect(a[0]!.id).toBe(b[0]!.id);
    expect(a[0]!.type).toBe(b[0]!.type);
    expect(a[0]!.data.email_id).toBe(`em_bl_${idA}_000000001`);
    expect(a[0]!.data.email_id).not.toBe(b[0]!.data.email_id);
    expect(a[0]!.data.to).not.toEqual(b[0]!.data.to);
    expect(d[0]!.data).toMatchObject({ email_id: 'em_bl_000000001', from: 'backlog@example.test' });
  });

  it('keeps webhooks per account and delivers only that account’s events to them', async () => {
    const reg = await call(sim(), 'POST', '/api/webhooks', {
      key: KEY_A,
      body: { url: receiver.url, events: ['contact.subscribed'] },
    });
    expect(reg.status).toBe(200);
    expect((await call(sim(), 'GET', '/api/webhooks', { key: KEY_A })).body.data).toHaveLength(1);
    expect((await call(sim(), 'GET', '/api/webhooks', { key: KEY_B })).body.data).toEqual([]);
    const foreign = await call(sim(), 'GET', `/api/webhooks/${reg.body.id}/deliveries`, { key: KEY_B });
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.code).toBe('webhook_not_found');

    const before = receiver.received.length;
    sim().account(KEY_B).emitContactEvent('contact.subscribed', 'b@example.test');
    const mine = sim().account(KEY_A).emitContactEvent('contact.subscribed', 'a@example.test');
    const received = await receiver.waitFor(before + 1);
    expect(JSON.parse(received[before]!.body.toString()).data).toEqual({ email: 'a@example.test' });
    expect(JSON.parse(received[before]!.body.toString()).id).toBe(mine.id);

    // The control API finds a webhook of any account by its id.
    const listed = await call(sim(), 'GET', `/_sim/webhooks/${reg.body.id}/deliveries`, { key: null });
    expect(listed.body.data[0]).toMatchObject({ event_id: mine.id, status: 'succeeded' });
    expect(receiver.received).toHaveLength(before + 1);
  });

  it('reports totals in /_sim/stats and the same per account, never a key', async () => {
    const res = await call(sim(), 'GET', '/_sim/stats', { key: null });
    const { accounts } = res.body;
    const a = accounts[sim().account(KEY_A).id];
    const b = accounts[sim().account(KEY_B).id];
    const d = accounts[sim().account(TEST_API_KEY).id];
    expect(a).toMatchObject({ key_hint: 'sim_test_…0001', default: false, emails_sent: 1, webhooks: 1 });
    expect(a.webhook_deliveries).toEqual({ attempted: 1, succeeded: 1, failed: 0 });
    expect(b).toMatchObject({ key_hint: 'sim_live_…0002', emails_sent: 1, webhooks: 0 });
    expect(b.webhook_deliveries.attempted).toBe(0);
    expect(d.default).toBe(true);
    expect(a.requests['POST /api/emails']).toEqual({ '200': 1 });
    expect(a.requests['GET /api/events']?.['200']).toBeGreaterThanOrEqual(2);

    const all = Object.values(accounts) as { emails_sent: number; events: number }[];
    expect(res.body.emails_sent).toBe(all.reduce((n, x) => n + x.emails_sent, 0));
    expect(res.body.events).toBe(all.reduce((n, x) => n + x.events, 0));
    expect(res.body.events).toBe(a.events + b.events + d.events);
    expect(sim().account(KEY_A).stats()).toEqual(a);
    for (const key of [KEY_A, KEY_B, TEST_API_KEY]) expect(JSON.stringify(res.body)).not.toContain(key);
  });
});

describe('the control API names an account by key or id', () => {
  it('adds to the backlog of the account a key names, and of the default one without', async () => {
    const key = 'sim_test_backlog_only';
    const set = await call(sim(), 'POST', '/_sim/backlog', { key: null, body: { key, count: 3 } });
    expect(set.status).toBe(200);
    const total = BACKLOG + 3;
    expect(set.body).toEqual({ account: sim().account(key).id, added: 3, count: total, events: total });
    expect(await feed(key)).toHaveLength(total);
    const byId = await call(sim(), 'POST', '/_sim/backlog', {
      key: null,
      body: { account: sim().account(key).id, count: 5 },
    });
    expect(byId.body.events).toBe(total + 5);
    expect((await feed(TEST_API_KEY)).length).toBeGreaterThan(5);
  });

  it('refuses a key the API would refuse without echoing it, and an unknown account id', async () => {
    const bad = await call(sim(), 'POST', '/_sim/backlog', {
      key: null,
      body: { key: 'NOT-a-key', count: 1 },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('invalid_field');
    expect(JSON.stringify(bad.body)).not.toContain('NOT-a-key');
    const unknown = await call(sim(), 'POST', '/_sim/backlog', {
      key: null,
      body: { account: 'acct_0', count: 1 },
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('account_not_found');
    expect(() => sim().account('NOT-a-key')).toThrow(RangeError);
  });

  it('appends contact events to the account named', async () => {
    const key = 'sim_test_contacts_only';
    const res = await call(sim(), 'POST', '/_sim/contacts', {
      key: null,
      body: { key, type: 'contact.unsubscribed', email: 'gone@example.test' },
    });
    expect(res.status).toBe(200);
    const events = await feed(key);
    expect(events.at(-1)).toEqual(res.body);
    expect((await feed(KEY_B)).map((e) => e.data.email)).not.toContain('gone@example.test');
  });

  it('sets fault knobs for one account alone, over the simulator-wide ones', async () => {
    const key = 'sim_test_failing_feed';
    const set = await call(sim(), 'POST', '/_sim/faults', { key: null, body: { key, rate5xx: 1 } });
    expect(set.status).toBe(200);
    expect(set.body.rate5xx).toBe(1);
    try {
      expect((await call(sim(), 'GET', '/api/events', { key })).status).toBe(503);
      expect((await call(sim(), 'GET', '/api/events', { key: KEY_A })).status).toBe(200);
      const id = sim().account(key).id;
      expect((await call(sim(), 'GET', `/_sim/faults?account=${id}`, { key: null })).body.rate5xx).toBe(1);
      expect((await call(sim(), 'GET', '/_sim/faults', { key: null })).body.rate5xx).toBe(0);
      // A simulator-wide knob reaches the account where it set none of its own.
      sim().setFaults({ latencyMs: 1 });
      expect((await call(sim(), 'GET', `/_sim/faults?account=${id}`, { key: null })).body.latencyMs).toBe(1);
    } finally {
      sim().setFaults({ latencyMs: 0 });
      sim().account(key).setFaults({ rate5xx: 0 });
    }
    expect((await call(sim(), 'GET', '/api/events', { key })).status).toBe(200);
  });
});

describe('the default account', () => {
  it('is the key the simulator is started with, <prefix>_test_local unless given', async () => {
    const plain = await startSimulator({ port: 0 });
    const fixed = await startSimulator({ port: 0, keyPrefix: 'acme' });
    try {
      expect(plain.defaultKey).toBe('sim_test_local');
      expect(fixed.defaultKey).toBe('acme_test_local');
      plain.emitContactEvent('contact.subscribed', 'x@example.test');
      const res = await call(plain, 'GET', '/api/events', { key: 'sim_test_local' });
      expect(res.body.data).toHaveLength(1);
    } finally {
      await Promise.all([plain.close(), fixed.close()]);
    }
    await expect(startSimulator({ port: 0, keyPrefix: 'acme', defaultKey: 'sim_test_x' })).rejects.toThrow(
      /defaultKey/,
    );
  });
});

describe('the number of accounts', () => {
  it(`is bounded: past ${MAX_ACCOUNTS}, a new key is a 403 too_many_accounts and /_sim/stats stops growing`, async () => {
    const own = await startSimulator({ port: 0 });
    try {
      const keys = Array.from(
        { length: MAX_ACCOUNTS + 5 },
        (_, i) => `sim_test_many_${String(i).padStart(5, '0')}`,
      );
      const statuses: number[] = [];
      for (const key of keys) statuses.push((await call(own, 'GET', '/api/events?limit=1', { key })).status);
      expect(statuses.filter((s) => s === 200)).toHaveLength(MAX_ACCOUNTS - 1);
      const refused = await call(own, 'GET', '/api/events?limit=1', { key: keys.at(-1)! });
      expect(refused).toMatchObject({ status: 403, body: { error: { code: 'too_many_accounts' } } });
      // A key it already knows still works.
      expect((await call(own, 'GET', '/api/events?limit=1', { key: keys[0]! })).status).toBe(200);
    } finally {
      await own.close();
    }
  }, 120_000);

  it('takes a bound of its own (maxAccounts): a fleet bench of many tenants raises it', async () => {
    const own = await startSimulator({ port: 0, maxAccounts: 3 });
    try {
      const statuses: number[] = [];
      for (const i of [1, 2, 3]) {
        statuses.push((await call(own, 'GET', '/api/events?limit=1', { key: `sim_test_few_${i}` })).status);
      }
      // The default account is one of the three.
      expect(statuses).toEqual([200, 200, 403]);
    } finally {
      await own.close();
    }
  });
});
