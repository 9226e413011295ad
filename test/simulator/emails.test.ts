import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { outcomeOf } from '../../src/simulator/emails.js';
import type { Simulator } from '../../src/simulator/index.js';
import { startTestSimulator, useSimulator } from '../support/simulator.js';
import { call, EMAIL } from './http.js';

const sim = useSimulator();

async function feed(s: Simulator, query = '') {
  return (await call(s, 'GET', `/api/events?limit=1000${query}`)).body.data as {
    type: string;
    id: string;
    created_at: string;
    data: { email_id: string; to: string[] };
  }[];
}

describe('keys', () => {
  it.each([
    ['no header', null, 'missing_api_key'],
    ['another scheme', 'Basic abc', 'invalid_api_key'],
    ['no environment part', 'sim_abc', 'invalid_api_key'],
    ['an unknown environment', 'sim_prod_abc', 'invalid_api_key'],
    ['an upper-case prefix', 'SIM_test_abc', 'invalid_api_key'],
    ['nothing after the environment', 'sim_test_', 'invalid_api_key'],
  ])('refuses %s with 401', async (_name, key, code) => {
    const headers = key?.startsWith('Basic') ? { authorization: key } : {};
    const res = await call(sim(), 'GET', '/api/events', {
      key: key?.startsWith('Basic') ? null : key,
      headers,
    });
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: { code, message: expect.any(String) } });
    if (key) expect(JSON.stringify(res.body)).not.toContain(key);
  });

  it('accepts test and live keys of any lowercase prefix', async () => {
    for (const key of ['acme_test_1', 'service_live_Abc-9_x', 'x_test_y']) {
      expect((await call(sim(), 'GET', '/api/events', { key })).status).toBe(200);
    }
  });

  it('accepts only the configured prefix when one is fixed', async () => {
    const fixed = await startTestSimulator({ keyPrefix: 'acme' });
    try {
      expect((await call(fixed, 'GET', '/api/events', { key: 'acme_live_1' })).status).toBe(200);
      expect((await call(fixed, 'GET', '/api/events', { key: 'other_live_1' })).status).toBe(401);
    } finally {
      await fixed.close();
    }
  });

  it('checks the key on unknown /api routes too, then answers 404', async () => {
    expect((await call(sim(), 'GET', '/api/nothing', { key: null })).status).toBe(401);
    const res = await call(sim(), 'GET', '/api/nothing');
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('not_found');
  });
});

describe('POST /emails', () => {
  it('answers an id and emits email.sent then email.delivered', async () => {
    const before = sim().stats().emails_sent;
    const res = await call(sim(), 'POST', '/api/emails', {
      body: { ...EMAIL, to: ['someone@example.test'] },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ id: expect.stringMatching(/^em_/) });
    expect(sim().stats().emails_sent).toBe(before + 1);
    const mine = (await feed(sim())).filter((e) => e.data.email_id === res.body.id);
    expect(mine.map((e) => e.type)).toEqual(['email.sent', 'email.delivered']);
    expect(mine[0]!.data).toMatchObject({ to: ['someone@example.test'], from: EMAIL.from, subject: 'Hello' });
  });

  it('accepts a single address as "to"', async () => {
    const res = await call(sim(), 'POST', '/api/emails', { body: { ...EMAIL, to: 'one@example.test' } });
    expect(res.status).toBe(200);
  });

  it.each([
    ['delivered@example.test', ['email.sent', 'email.delivered']],
    ['bounced@example.test', ['email.sent', 'email.bounced']],
    ['complained@example.test', ['email.sent', 'email.delivered', 'email.complained']],
    ['failed@example.test', ['email.sent', 'email.failed']],
    ['Bounced+tag@example.test', ['email.sent', 'email.bounced']],
    ['anyone@example.test', ['email.sent', 'email.delivered']],
  ])('decides the outcome for %s by its local part', async (to, types) => {
    const { body } = await call(sim(), 'POST', '/api/emails', { body: { ...EMAIL, to: [to] } });
    const mine = (await feed(sim())).filter((e) => e.data.email_id === body.id);
    expect(mine.map((e) => e.type)).toEqual(types);
    for (let i = 1; i < mine.length; i++) expect(mine[i]!.id > mine[i - 1]!.id).toBe(true);
  });

  it('groups several recipients by outcome', async () => {
    const to = ['a@example.test', 'bounced@example.test', 'complained@example.test'];
    const { body } = await call(sim(), 'POST', '/api/emails', { body: { ...EMAIL, to } });
    const mine = (await feed(sim())).filter((e) => e.data.email_id === body.id);
    expect(mine.map((e) => [e.type, e.data.to])).toEqual([
      ['email.sent', to],
      ['email.delivered', ['a@example.test']],
      ['email.bounced', ['bounced@example.test']],
      ['email.delivered', ['complained@example.test']],
      ['email.complained', ['complained@example.test']],
    ]);
  });

  it('outcomeOf reads the local part before any +tag', () => {
    expect(outcomeOf('failed+x@failed.test')).toBe('failed');
    expect(outcomeOf('user@bounced.test')).toBe('delivered');
  });
});

describe('Idempotency-Key', () => {
  it('same key and same body: same id, nothing sent again', async () => {
    const headers = { 'idempotency-key': 'order-1' };
    const body = { ...EMAIL, to: ['x@example.test'] };
    const first = await call(sim(), 'POST', '/api/emails', { body, headers });
    const sent = sim().stats().emails_sent;
    const events = sim().stats().events;
    const second = await call(sim(), 'POST', '/api/emails', { body, headers });
    expect(second.status).toBe(200);
    expect(second.body.id).toBe(first.body.id);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(sim().stats().emails_sent).toBe(sent);
    expect(sim().stats().events).toBe(events);
  });

  it('same key and another body: 409, nothing sent', async () => {
    const headers = { 'idempotency-key': 'order-2' };
    await call(sim(), 'POST', '/api/emails', { body: { ...EMAIL, to: ['x@example.test'] }, headers });
    const sent = sim().stats().emails_sent;
    const res = await call(sim(), 'POST', '/api/emails', {
      body: { ...EMAIL, to: ['y@example.test'] },
      headers,
    });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('idempotency_conflict');
    expect(sim().stats().emails_sent).toBe(sent);
  });

  it('different keys send twice', async () => {
    const body = { ...EMAIL, to: ['x@example.test'] };
    const a = await call(sim(), 'POST', '/api/emails', { body, headers: { 'idempotency-key': 'k-a' } });
    const b = await call(sim(), 'POST', '/api/emails', { body, headers: { 'idempotency-key': 'k-b' } });
    expect(a.body.id).not.toBe(b.body.id);
  });

  it('refuses an over-long key', async () => {
    const res = await call(sim(), 'POST', '/api/emails', {
      body: { ...EMAIL, to: ['x@example.test'] },
      headers: { 'idempotency-key': 'k'.repeat(300) },
    });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_header');
  });
});

describe('bad input gets a JSON 4xx with a stable code, never a 500', () => {
  const cases: [string, { body?: unknown; headers?: Record<string, string> }, number, string][] = [
    ['bad JSON', { body: '{"from":', headers: { 'content-type': 'application/json' } }, 400, 'invalid_json'],
    ['no content type', { body: JSON.stringify({ ...EMAIL, to: ['a@b.c'] }) }, 415, 'unsupported_media_type'],
    [
      'text/plain',
      { body: JSON.stringify({ ...EMAIL, to: ['a@b.c'] }), headers: { 'content-type': 'text/plain' } },
      415,
      'unsupported_media_type',
    ],
    ['an array body', { body: [1, 2] }, 400, 'invalid_body'],
    ['a null body', { body: 'null', headers: { 'content-type': 'application/json' } }, 400, 'invalid_body'],
    ['missing "to"', { body: EMAIL }, 400, 'missing_field'],
    ['missing "from"', { body: { to: ['a@b.c'], subject: 's', html: 'h' } }, 400, 'missing_field'],
    ['missing "html"', { body: { from: 'f@x.y', to: ['a@b.c'], subject: 's' } }, 400, 'missing_field'],
    ['"to" empty', { body: { ...EMAIL, to: [] } }, 400, 'invalid_field'],
    ['"to" not addresses', { body: { ...EMAIL, to: ['nobody'] } }, 400, 'invalid_field'],
    ['"to" of numbers', { body: { ...EMAIL, to: [1] } }, 400, 'invalid_field'],
    ['"subject" a number', { body: { ...EMAIL, subject: 5, to: ['a@b.c'] } }, 400, 'invalid_field'],
    [
      'a body over 1 MiB',
      { body: { ...EMAIL, to: ['a@b.c'], html: 'x'.repeat(1_100_000) } },
      413,
      'payload_too_large',
    ],
  ];
  it.each(cases)('%s', async (_name, opts, status, code) => {
    const sent = sim().stats().emails_sent;
    const res = await call(sim(), 'POST', '/api/emails', opts);
    expect(res.status).toBe(status);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toEqual({ error: { code, message: expect.any(String) } });
    expect(sim().stats().emails_sent).toBe(sent);
  });

  it('wrong method: 405 with Allow', async () => {
    const res = await call(sim(), 'GET', '/api/emails');
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('POST');
    expect(res.body.error.code).toBe('method_not_allowed');
  });

  it('never answered 500 in this file', () => {
    for (const byStatus of Object.values(sim().stats().requests)) expect(byStatus['500']).toBeUndefined();
  });
});

describe('an injected clock', () => {
  let fixed: Simulator;
  beforeAll(async () => {
    fixed = await startTestSimulator({ now: () => Date.UTC(2030, 0, 2, 3, 4, 5) });
  });
  afterAll(() => fixed.close());

  it('stamps created_at', async () => {
    await call(fixed, 'POST', '/api/emails', { body: { ...EMAIL, to: ['a@example.test'] } });
    const events = await feed(fixed);
    expect(events.map((e) => e.created_at)).toEqual(['2030-01-02T03:04:05.000Z', '2030-01-02T03:04:05.000Z']);
  });
});
