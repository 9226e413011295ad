import { describe, expect, it } from 'vitest';
import { backlogEvent, backlogType } from '../../src/simulator/backlog.js';
import { eventIdAt, positionOfId } from '../../src/simulator/event-log.js';
import { parseTypes } from '../../src/simulator/feed.js';
import { MAX_LIMIT } from '../../src/simulator/index.js';
import { startTestSimulator, TEST_API_KEY, useSimulator } from '../support/simulator.js';
import { call, EMAIL } from './http.js';

const sim = useSimulator();

async function page(query: string) {
  return call(sim(), 'GET', `/api/events${query}`);
}

describe('GET /events on an empty feed', () => {
  it('answers an empty list and next_after null', async () => {
    const res = await page('');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: [], next_after: null });
  });
});

describe('GET /events paging', () => {
  it('pages with after and limit; next_after is the last id, or the after sent on an empty page', async () => {
    for (const to of ['a@example.test', 'bounced@example.test', 'c@example.test']) {
      await call(sim(), 'POST', '/api/emails', { body: { ...EMAIL, to: [to] } });
    }
    const all = (await page('')).body;
    expect(all.data).toHaveLength(6);
    expect(all.next_after).toBe(all.data[5].id);
    for (const e of all.data) {
      expect(Object.keys(e).sort()).toEqual(['created_at', 'data', 'id', 'type']);
      expect(new Date(e.created_at).toISOString()).toBe(e.created_at);
    }
    expect(new Set(all.data.map((e: { id: string }) => e.id)).size).toBe(6);

    const first = (await page('?limit=4')).body;
    expect(first.data.map((e: { id: string }) => e.id)).toEqual(
      all.data.slice(0, 4).map((e: { id: string }) => e.id),
    );
    expect(first.next_after).toBe(all.data[3].id);

    const second = (await page(`?limit=4&after=${first.next_after}`)).body;
    expect(second.data).toEqual(all.data.slice(4));
    expect(second.next_after).toBe(all.data[5].id);

    const empty = (await page(`?limit=4&after=${second.next_after}`)).body;
    expect(empty).toEqual({ data: [], next_after: second.next_after });
  });

  it('filters by short and full type names', async () => {
    const delivered = (await page('?type=delivered')).body.data;
    expect(delivered.map((e: { type: string }) => e.type)).toEqual(['email.delivered', 'email.delivered']);
    const two = (await page('?type=bounced,email.sent')).body.data;
    expect(new Set(two.map((e: { type: string }) => e.type))).toEqual(
      new Set(['email.sent', 'email.bounced']),
    );
    expect(two).toHaveLength(4);

    sim().emitContactEvent('contact.subscribed', 'new@example.test');
    const contacts = (await page('?type=contact.subscribed')).body;
    expect(contacts.data).toEqual([
      {
        type: 'contact.subscribed',
        id: expect.any(String),
        created_at: expect.any(String),
        data: { email: 'new@example.test' },
      },
    ]);
    expect(contacts.next_after).toBe(contacts.data[0].id);
    const after = (await page(`?type=contact.subscribed&after=${contacts.next_after}`)).body;
    expect(after).toEqual({ data: [], next_after: contacts.next_after });
  });

  it('a filtered page skips other events but next_after still moves', async () => {
    const first = (await page('?type=delivered&limit=1')).body;
    const second = (await page(`?type=delivered&limit=1&after=${first.next_after}`)).body;
    expect(second.data[0].id > first.data[0].id).toBe(true);
  });

  it.each([
    ['an unknown after id', '?after=evt_999999999999', 'unknown_event_id'],
    ['a malformed after id', '?after=garbage', 'unknown_event_id'],
    ['after id 0', '?after=evt_000000000000', 'unknown_event_id'],
    ['limit 0', '?limit=0', 'invalid_limit'],
    ['limit above the maximum', `?limit=${MAX_LIMIT + 1}`, 'invalid_limit'],
    ['limit not a number', '?limit=ten', 'invalid_limit'],
    ['a negative limit', '?limit=-5', 'invalid_limit'],
    ['a malformed type', '?type=Delivered!', 'invalid_type'],
  ])('refuses %s with 400', async (_name, query, code) => {
    const res = await page(query);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: { code, message: expect.any(String) } });
  });

  it('accepts the maximum limit', async () => {
    expect((await page(`?limit=${MAX_LIMIT}`)).status).toBe(200);
  });
});

describe('event ids', () => {
  it('map back to their position', () => {
    expect(eventIdAt(42)).toBe('evt_000000000042');
    expect(positionOfId(eventIdAt(123_456_789))).toBe(123_456_789);
    expect(positionOfId('evt_42')).toBeNull();
  });

  it('sort in feed order as strings', () => {
    expect(eventIdAt(9) < eventIdAt(10)).toBe(true);
  });
});

describe('parseTypes', () => {
  it('expands short email kinds', () => {
    expect(parseTypes('delivered, bounced,,contact.unsubscribed')).toEqual(
      new Set(['email.delivered', 'email.bounced', 'contact.unsubscribed']),
    );
    expect(parseTypes('')).toBeNull();
    expect(parseTypes(null)).toBeNull();
  });
});

describe('synthetic backlog', () => {
  it('is generated from the index alone, in a realistic mix', () => {
    const a = backlogEvent(1234, 'evt_x', 0);
    expect(backlogEvent(1234, 'evt_x', 0)).toEqual(a);
    const types = new Set(Array.from({ length: 210 }, (_, i) => backlogType(i + 1)));
    expect(types).toEqual(
      new Set(['email.sent', 'email.delivered', 'email.bounced', 'email.complained', 'email.failed']),
    );
    for (let p = 1; p <= 210; p++) expect(backlogEvent(p, 'x', 0).type).toBe(backlogType(p));
  });

  it('keeps every email in order: sent first, its outcome after', () => {
    const seen = new Map<string, string[]>();
    for (let p = 1; p <= 500; p++) {
      const e = backlogEvent(p, 'x', 0);
      const id = e.data.email_id as string;
      seen.set(id, [...(seen.get(id) ?? []), e.type]);
    }
    for (const types of seen.values()) expect(types[0]).toBe('email.sent');
  });

  it('a million events stay well under 100 MB and page from anywhere', async () => {
    const before = process.memoryUsage();
    const big = await startTestSimulator({ backlog: 1_000_000 });
    try {
      expect(big.stats().events).toBe(1_000_000);
      let after: string | null = null;
      let last = '';
      for (let i = 0; i < 20; i++) {
        const res = await call(big, 'GET', `/api/events?limit=1000${after ? `&after=${after}` : ''}`);
        expect(res.body.data).toHaveLength(1000);
        for (const e of res.body.data) {
          expect(e.id > last).toBe(true);
          last = e.id;
        }
        after = res.body.next_after;
      }
      expect(after).toBe(eventIdAt(20_000));

      const middle = await call(big, 'GET', `/api/events?limit=1000&after=${eventIdAt(500_000)}`);
      expect(middle.body.data[0].id).toBe(eventIdAt(500_001));
      const tail = await call(big, 'GET', `/api/events?limit=1000&after=${eventIdAt(999_990)}`);
      expect(tail.body.data).toHaveLength(10);
      expect(tail.body.next_after).toBe(eventIdAt(1_000_000));
      const times = tail.body.data.map((e: { created_at: string }) => Date.parse(e.created_at));
      expect([...times].sort((x, y) => x - y)).toEqual(times);

      const rare = await call(big, 'GET', '/api/events?type=failed&limit=5');
      expect(rare.body.data.map((e: { type: string }) => e.type)).toEqual(Array(5).fill('email.failed'));

      const after1M = process.memoryUsage();
      const grownMb = (after1M.heapUsed - before.heapUsed) / 1024 / 1024;
      const rssMb = (after1M.rss - before.rss) / 1024 / 1024;
      expect(grownMb).toBeLessThan(100);
      expect(rssMb).toBeLessThan(100);

      // Real events follow the backlog, later in time too.
      await call(big, 'POST', '/api/emails', { body: { ...EMAIL, to: ['a@example.test'] } });
      const real = await call(big, 'GET', `/api/events?after=${eventIdAt(1_000_000)}`);
      expect(real.body.data[0].id).toBe(eventIdAt(1_000_001));
      expect(Date.parse(real.body.data[0].created_at)).toBeGreaterThan(times.at(-1));
    } finally {
      await big.close();
    }
  });

  it('grows through /_sim/backlog {count}, never changing what was served', async () => {
    let now = Date.parse('2026-01-01T00:00:00Z');
    const fresh = await startTestSimulator({ now: () => now });
    const all = async () => (await call(fresh, 'GET', '/api/events?limit=1000')).body.data;
    try {
      const first = await call(fresh, 'POST', '/_sim/backlog', { body: { count: 50 } });
      expect(first.body).toEqual({
        account: fresh.account(TEST_API_KEY).id,
        added: 50,
        count: 50,
        events: 50,
      });
      const served = await all();
      expect(served).toHaveLength(50);

      // A real event, then more backlog: all of it after what was served, which is left as it was.
      now += 1_000;
      fresh.emitContactEvent('contact.subscribed', 'a@example.test');
      now += 60_000;
      const more = await call(fresh, 'POST', '/_sim/backlog', { body: { count: 30 } });
      expect(more.status).toBe(200);
      expect(more.body).toMatchObject({ added: 30, count: 80, events: 81 });
      const feed = await all();
      expect(feed.slice(0, 50)).toEqual(served);
      expect(feed[50].type).toBe('contact.subscribed');
      expect(feed.map((e: { id: string }) => e.id)).toEqual(
        Array.from({ length: 81 }, (_, i) => eventIdAt(i + 1)),
      );
      // The added events go on the backlog's content (new emails) and keep time in order.
      const times = feed.map((e: { created_at: string }) => Date.parse(e.created_at));
      expect([...times].sort((x, y) => x - y)).toEqual(times);
      expect(times.at(-1)).toBeLessThanOrEqual(now);
      const emails = new Set(feed.slice(51).map((e: { data: { email_id: string } }) => e.data.email_id));
      for (const e of feed.slice(0, 50))
        expect(emails.has(e.data.email_id) && e.type === 'email.sent').toBe(false);
      // A cursor handed out before the addition still pages on.
      const after = await call(fresh, 'GET', `/api/events?after=${eventIdAt(50)}&limit=5`);
      expect(after.body.data.map((e: { id: string }) => e.id)).toEqual([51, 52, 53, 54, 55].map(eventIdAt));

      // Added right after a real event: no event older than it, squeezed in between.
      const squeezed = await call(fresh, 'POST', '/_sim/backlog', { body: { count: 1_000 } });
      expect(squeezed.body.events).toBe(1_081);
      const tail = (await call(fresh, 'GET', `/api/events?after=${eventIdAt(80)}&limit=1000`)).body.data;
      const tailTimes = tail.map((e: { created_at: string }) => Date.parse(e.created_at));
      expect([...tailTimes].sort((x, y) => x - y)).toEqual(tailTimes);
      expect(tailTimes.at(-1)).toBeLessThanOrEqual(now);

      const bad = await call(fresh, 'POST', '/_sim/backlog', { body: { count: -1 } });
      expect(bad.status).toBe(400);
      const missing = await call(fresh, 'POST', '/_sim/backlog', { body: {} });
      expect(missing.body.error.code).toBe('missing_field');
      const badReplace = await call(fresh, 'POST', '/_sim/backlog', { body: { count: 1, replace: 'yes' } });
      expect(badReplace.body.error.code).toBe('invalid_field');
    } finally {
      await fresh.close();
    }
  });

  it('is replaced ({count, replace: true}, or setBacklog) only before the first real event', async () => {
    const fresh = await startTestSimulator();
    try {
      await call(fresh, 'POST', '/_sim/backlog', { body: { count: 50 } });
      const set = await call(fresh, 'POST', '/_sim/backlog', { body: { count: 20, replace: true } });
      expect(set.body).toMatchObject({ added: 20, count: 20, events: 20 });
      expect((await call(fresh, 'GET', '/api/events?limit=1000')).body.data).toHaveLength(20);
      fresh.setBacklog(10);
      expect(fresh.stats().events).toBe(10);

      fresh.emitContactEvent('contact.unsubscribed', 'a@example.test');
      const locked = await call(fresh, 'POST', '/_sim/backlog', { body: { count: 5, replace: true } });
      expect(locked.status).toBe(409);
      expect(locked.body.error.code).toBe('backlog_locked');
      expect(() => fresh.setBacklog(5)).toThrow(/before the first real event/);
    } finally {
      await fresh.close();
    }
  });
});
