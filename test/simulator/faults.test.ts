import { request } from 'undici';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { chance, DEFAULT_FAULTS, mergeFaults } from '../../src/simulator/faults.js';
import type { Simulator } from '../../src/simulator/index.js';
import { Timers } from '../../src/simulator/timers.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import { call, EMAIL } from './http.js';

const sim = useSimulator({ backlog: 30 });
afterEach(() => sim().setFaults({ ...DEFAULT_FAULTS }));

function raw(s: Simulator, path: string, opts: { bodyTimeout?: number } = {}) {
  return request(`${s.origin}${path}`, { headers: { authorization: `Bearer ${TEST_API_KEY}` }, ...opts });
}

describe('fault knobs', () => {
  it('latencyMs delays every /api response', async () => {
    sim().setFaults({ latencyMs: 150 });
    const started = performance.now();
    expect((await call(sim(), 'GET', '/api/webhooks')).status).toBe(200);
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);
  });

  it('rate429 answers 429 with Retry-After and a JSON body', async () => {
    sim().setFaults({ rate429: 1, retryAfterSec: 7 });
    const sent = sim().stats().emails_sent;
    const res = await call(sim(), 'POST', '/api/emails', { body: { ...EMAIL, to: ['a@example.test'] } });
    expect(res.status).toBe(429);
    expect(res.headers['retry-after']).toBe('7');
    expect(res.body.error.code).toBe('rate_limited');
    expect(sim().stats().emails_sent).toBe(sent);
    expect(sim().stats().requests['POST /api/emails']?.['429']).toBeGreaterThan(0);
  });

  it('rate5xx answers 503', async () => {
    sim().setFaults({ rate5xx: 1 });
    const res = await call(sim(), 'GET', '/api/events');
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('service_unavailable');
  });

  it('a bad key is 401 even while faults are on', async () => {
    sim().setFaults({ rate429: 1, rate5xx: 1 });
    expect((await call(sim(), 'GET', '/api/events', { key: 'nope' })).status).toBe(401);
  });

  it('faults leave /_sim alone', async () => {
    sim().setFaults({ rate5xx: 1, latencyMs: 60_000 });
    expect((await call(sim(), 'GET', '/_sim/stats', { key: null })).status).toBe(200);
  });

  it('duplicateRate repeats the last events of the previous page, within the limit', async () => {
    const first = (await call(sim(), 'GET', '/api/events?limit=10')).body;
    sim().setFaults({ duplicateRate: 1 });
    const second = (await call(sim(), 'GET', `/api/events?limit=10&after=${first.next_after}`)).body;
    const ids = second.data.map((e: { id: string }) => e.id);
    expect(ids).toHaveLength(10);
    expect(ids.slice(0, 3)).toEqual(first.data.slice(-3).map((e: { id: string }) => e.id));
    expect(second.next_after > first.next_after).toBe(true);

    // At the end of the feed nothing is repeated, so next_after never moves back.
    const last = (await call(sim(), 'GET', '/api/events?limit=1000')).body.next_after;
    expect((await call(sim(), 'GET', `/api/events?after=${last}`)).body).toEqual({
      data: [],
      next_after: last,
    });
    // limit=1 leaves no room for a repeat.
    const one = (await call(sim(), 'GET', `/api/events?limit=1&after=${first.next_after}`)).body;
    expect(one.data.map((e: { id: string }) => e.id)).toEqual([second.data[3].id]);
  });

  it('slowBodyMs drips the body out', async () => {
    sim().setFaults({ slowBodyMs: 200 });
    const started = performance.now();
    const res = await raw(sim(), '/api/events?limit=5');
    const body = await res.body.json();
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
    expect((body as { data: unknown[] }).data).toHaveLength(5);
  });

  it('truncateRate cuts the body short of its Content-Length', async () => {
    sim().setFaults({ truncateRate: 1 });
    const res = await raw(sim(), '/api/events?limit=5');
    expect(res.statusCode).toBe(200);
    expect(Number(res.headers['content-length'])).toBeGreaterThan(0);
    await expect(res.body.text()).rejects.toThrow();
  });

  it('truncation and a slow body combine', async () => {
    sim().setFaults({ truncateRate: 1, slowBodyMs: 50 });
    const res = await raw(sim(), '/api/events?limit=5');
    await expect(res.body.text()).rejects.toThrow();
  });

  it('hangRate sends headers and never finishes the body', async () => {
    sim().setFaults({ hangRate: 1 });
    const res = await raw(sim(), '/api/events?limit=5', { bodyTimeout: 200 });
    expect(res.statusCode).toBe(200);
    await expect(res.body.text()).rejects.toThrow(/timeout/i);
  });

  it('body faults touch only /events', async () => {
    sim().setFaults({ hangRate: 1, truncateRate: 1 });
    expect((await call(sim(), 'GET', '/api/webhooks')).status).toBe(200);
  });

  it('POST /_sim/faults sets knobs and answers them all', async () => {
    const res = await call(sim(), 'POST', '/_sim/faults', {
      body: { rate5xx: 0.5, latencyMs: 3 },
      key: null,
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ...DEFAULT_FAULTS, rate5xx: 0.5, latencyMs: 3 });
    expect((await call(sim(), 'GET', '/_sim/faults', { key: null })).body).toEqual(res.body);
  });

  it.each([
    [{ rate429: 2 }],
    [{ rate5xx: -0.1 }],
    [{ latencyMs: 'slow' }],
    [{ unknownKnob: 1 }],
    [{ slowBodyMs: 1e9 }],
  ])('POST /_sim/faults refuses %j with 400', async (body) => {
    const res = await call(sim(), 'POST', '/_sim/faults', { body, key: null });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_field');
  });

  it('setFaults refuses out-of-range values too', () => {
    expect(() => sim().setFaults({ rate429: 5 })).toThrow(/rate429/);
  });

  it('rates are drawn per request from the random source', async () => {
    let n = 0;
    const random = () => [0.1, 0.9][n++ % 2]!;
    expect(chance(0.5, random)).toBe(true);
    expect(chance(0.5, random)).toBe(false);
    expect(chance(0, () => 0)).toBe(false);
    expect(chance(1, () => 0.999)).toBe(true);
  });

  it('mergeFaults keeps what the patch does not name', () => {
    expect(mergeFaults({ ...DEFAULT_FAULTS, rate429: 0.2 }, { hangRate: 0.1 })).toMatchObject({
      rate429: 0.2,
      hangRate: 0.1,
    });
  });
});

describe('Timers', () => {
  it('clear() cancels what is pending and releases sleepers', async () => {
    vi.useFakeTimers();
    try {
      const timers = new Timers();
      const fn = vi.fn();
      timers.later(1000, fn);
      const slept = timers.sleep(60_000);
      timers.clear();
      await slept;
      vi.advanceTimersByTime(120_000);
      expect(fn).not.toHaveBeenCalled();
      timers.later(1, fn);
      vi.advanceTimersByTime(10);
      expect(fn).not.toHaveBeenCalled();
    } finally {
      vi.useRealTimers();
    }
  });
});
