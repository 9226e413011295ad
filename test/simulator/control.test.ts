import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { isLoopbackAddress, startSimulator } from '../../src/simulator/index.js';
import { startTestSimulator, TEST_API_KEY, useSimulator } from '../support/simulator.js';
import { call, EMAIL } from './http.js';

const sim = useSimulator();

describe('/_sim control API', () => {
  it('GET /_sim/stats counts emails, requests by route and status, deliveries and events', async () => {
    await call(sim(), 'POST', '/api/emails', { body: { ...EMAIL, to: ['a@example.test'] } });
    await call(sim(), 'GET', '/api/events');
    await call(sim(), 'GET', '/api/events?limit=0');
    await call(sim(), 'GET', '/nowhere');
    const res = await call(sim(), 'GET', '/_sim/stats', { key: null });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      emails_sent: 1,
      events: 2,
      webhook_deliveries: { attempted: 0, succeeded: 0, failed: 0 },
    });
    expect(res.body.requests['POST /api/emails']).toEqual({ '200': 1 });
    expect(res.body.requests['GET /api/events']).toEqual({ '200': 1, '400': 1 });
    expect(res.body.requests.unmatched).toEqual({ '404': 1 });
    expect(sim().stats()).toMatchObject({ emails_sent: 1, events: 2 });
  });

  it('POST /_sim/contacts appends a contact event to the feed', async () => {
    const res = await call(sim(), 'POST', '/_sim/contacts', {
      body: { type: 'contact.unsubscribed', email: 'gone@example.test' },
      key: null,
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ type: 'contact.unsubscribed', data: { email: 'gone@example.test' } });
    const feed = (await call(sim(), 'GET', '/api/events?type=contact.unsubscribed')).body.data;
    expect(feed).toEqual([res.body]);
  });

  it.each([
    [{ type: 'contact.deleted', email: 'a@example.test' }, 'invalid_field'],
    [{ type: 'contact.subscribed', email: 'not-an-address' }, 'invalid_field'],
    [{ type: 'contact.subscribed' }, 'missing_field'],
    [{ email: 'a@example.test' }, 'missing_field'],
  ])('POST /_sim/contacts refuses %j', async (body, code) => {
    const res = await call(sim(), 'POST', '/_sim/contacts', { body, key: null });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe(code);
  });

  it('emitContactEvent checks its arguments', () => {
    expect(() => sim().emitContactEvent('contact.subscribed', 'nope')).toThrow(/email/);
  });

  it('bad JSON on /_sim is a 400, never a 500', async () => {
    const res = await call(sim(), 'POST', '/_sim/faults', { body: 'not json', key: null });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_json');
  });

  it('unknown route 404 and wrong method 405', async () => {
    const missing = await call(sim(), 'GET', '/_sim/nothing', { key: null });
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('not_found');
    const wrong = await call(sim(), 'DELETE', '/_sim/stats', { key: null });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.allow).toBe('GET');
    const wrongApi = await call(sim(), 'PUT', '/api/webhooks');
    expect(wrongApi.status).toBe(405);
    expect(wrongApi.headers.allow).toBe('POST, GET');
  });
});

describe('isLoopbackAddress', () => {
  it.each([
    ['127.0.0.1', true],
    ['127.8.9.10', true],
    ['::1', true],
    ['::ffff:127.0.0.1', true],
    ['10.0.0.1', false],
    ['192.168.1.5', false],
    ['::ffff:10.0.0.1', false],
    ['fe80::1', false],
    ['1127.0.0.1', false],
    ['', false],
    [undefined, false],
  ])('%s -> %s', (address, expected) => {
    expect(isLoopbackAddress(address)).toBe(expected);
  });
});

describe('start and stop', () => {
  it('serves baseUrl and origin on the port it got', async () => {
    const s = await startTestSimulator();
    try {
      expect(s.port).toBeGreaterThan(0);
      expect(s.origin).toBe(`http://127.0.0.1:${s.port}`);
      expect(s.baseUrl).toBe(`${s.origin}/api`);
    } finally {
      await s.close();
      await s.close();
    }
  });

  it('rejects when the port is taken', async () => {
    const s = await startTestSimulator();
    try {
      await expect(startSimulator({ port: s.port })).rejects.toThrow(/EADDRINUSE/);
    } finally {
      await s.close();
    }
  });

  it('refuses bad options', async () => {
    await expect(startSimulator({ port: -1 })).rejects.toThrow(RangeError);
    await expect(startSimulator({ port: 0, timeScale: -1 })).rejects.toThrow(RangeError);
    await expect(startSimulator({ port: 0, keyPrefix: 'Bad_' })).rejects.toThrow(RangeError);
    await expect(startSimulator({ port: 0, faults: { rate5xx: 3 } })).rejects.toThrow(/rate5xx/);
  });

  it('logs each request at debug, without the key', async () => {
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const s = await startTestSimulator({ logger: pino({ level: 'debug' }, destination) });
    try {
      await call(s, 'GET', '/api/events?limit=3');
    } finally {
      await s.close();
    }
    const requests = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'request');
    expect(requests).toEqual([
      expect.objectContaining({ level: 20, method: 'GET', route: 'GET /api/events', status: 200 }),
    ]);
    expect(lines.join('')).not.toContain(TEST_API_KEY);
  });
});
