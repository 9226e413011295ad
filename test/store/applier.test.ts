import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Applier, createApplier } from '../../src/store/applier.js';
import { ensureCursor, getCursor } from '../../src/store/cursor.js';
import type { Store } from '../../src/store/db.js';
import { event, migratedStore, route } from './migrated-store.js';

let store: Store;
let dispose: () => Promise<void>;
let applier: Applier;

beforeAll(async () => {
  ({ store, dispose } = await migratedStore('applier'));
  applier = createApplier(store, route);
});
afterAll(() => dispose());

async function counts(source: string) {
  const one = async (table: string) =>
    Number(
      (
        await store.pool.query(`SELECT count(*) AS n FROM ${store.schema}.${table} WHERE source = $1`, [
          source,
        ])
      ).rows[0].n,
    );
  return {
    events: await one('events'),
    outbox: await one('outbox'),
    quarantine: await one('quarantine'),
    emailStatus: await one('email_status'),
  };
}

describe('applier: events', () => {
  it('stores new events once: repeats within a batch and across batches count as duplicates', async () => {
    const a = event('a', 'contact.subscribed', '2024-01-01T00:00:00Z', { n: 1 });
    const b = event('b', 'webhook.test', '2024-01-01T00:00:01Z');
    const c = event('c', 'email.opened', '2024-01-01T00:00:02Z');
    const aAgain = { ...a, data: { n: 2 } };

    const first = await applier.apply({
      source: 'dup',
      receivedVia: 'feed',
      events: [a, b, aAgain],
      quarantine: [],
    });
    expect(first).toEqual({
      status: 'applied',
      inserted: [a, b],
      duplicates: 1,
      unstorable: [],
      quarantined: 0,
      // The repeat of a within the batch has other data: kept out, and recorded.
      conflicts: 1,
      firstConflicts: 1,
      // a has no data.email: stored and enqueued, no contact_status.
      contactsWithoutEmail: 1,
      outboxRows: 1,
      outbox: [
        { seq: expect.any(String), source: 'dup', queue: route(a.type)!.queue, jobName: a.type, event: a },
      ],
    });

    const second = await applier.apply({
      source: 'dup',
      receivedVia: 'feed',
      events: [b, c],
      quarantine: [],
    });
    expect(second).toMatchObject({ inserted: [c], duplicates: 1 });

    const hook = await applier.apply({ source: 'dup', receivedVia: 'webhook', events: [c], quarantine: [] });
    expect(hook).toMatchObject({ status: 'applied', inserted: [], duplicates: 1, outboxRows: 0 });

    const { rows } = await store.pool.query(
      `SELECT id, data, received_via FROM ${store.schema}.events WHERE source = 'dup' ORDER BY id`,
    );
    // The first copy stands; the feed got c first, so it stays recorded as such.
    expect(rows).toEqual([
      { id: 'a', data: { n: 1 }, received_via: 'feed' },
      { id: 'b', data: {}, received_via: 'feed' },
      { id: 'c', data: {}, received_via: 'feed' },
    ]);
  });

  it('keeps sources apart: the same id in two sources is two events', async () => {
    const e = event('same', 'webhook.test', '2024-01-01T00:00:00Z');
    for (const source of ['left', 'right']) {
      expect(
        await applier.apply({ source, receivedVia: 'webhook', events: [e], quarantine: [] }),
      ).toMatchObject({
        inserted: [e],
      });
    }
  });

  it('writes outbox rows only for routed types, in feed order, and hands them back with their events', async () => {
    const events = [
      event('o3', 'email.delivered', '2024-02-01T10:00:00.123456789Z', {
        email_id: 'm',
        to: ['x@example.com'],
      }),
      event('o1', 'webhook.test', '2024-02-01T10:00:01Z', { hello: 'world' }),
      event('o2', 'contact.subscribed', '2024-02-01T10:00:02+00:00', {
        contact: { id: 'k', tags: [1, 'two'] },
      }),
      event('o0', 'email.opened', '2024-02-01T10:00:03Z', { email_id: 'm' }),
      event('o9', 'email.sent', '2024-02-01T09:59:59Z', { email_id: 'm', to: ['x@example.com'] }),
    ];
    const result = await applier.apply({ source: 'ob', receivedVia: 'feed', events, quarantine: [] });
    expect(result).toMatchObject({ inserted: events, duplicates: 0, outboxRows: 3 });

    const { rows } = await store.pool.query(
      `SELECT seq, event_id, queue, job_name, payload, published_at FROM ${store.schema}.outbox
        WHERE source = 'ob' ORDER BY seq`,
    );
    // No copy of the event in the row: the batch's result carries it, for the relay.
    const routed = [events[0]!, events[2]!, events[4]!];
    expect(rows).toEqual(
      routed.map((e, i) => ({
        seq: result.outbox[i]!.seq,
        event_id: e.id,
        queue: route(e.type)!.queue,
        job_name: e.type,
        payload: null,
        published_at: null,
      })),
    );
    expect(result.outbox).toEqual(
      routed.map((e) => ({
        seq: expect.any(String),
        source: 'ob',
        queue: route(e.type)!.queue,
        jobName: e.type,
        event: e,
      })),
    );

    // A repeat adds no outbox row.
    const again = await applier.apply({ source: 'ob', receivedVia: 'webhook', events, quarantine: [] });
    expect(again).toMatchObject({ inserted: [], duplicates: 5, outboxRows: 0 });
    expect((await counts('ob')).outbox).toBe(3);
  });

  it('uses the job name the route gives', async () => {
    const custom = createApplier(store, (type) => ({ queue: 'all', jobName: `job:${type}` }));
    await custom.apply({
      source: 'jobs',
      receivedVia: 'feed',
      events: [event('j1', 'webhook.test', '2024-01-01T00:00:00Z')],
      quarantine: [],
    });
    const { rows } = await store.pool.query(
      `SELECT queue, job_name FROM ${store.schema}.outbox WHERE source = 'jobs'`,
    );
    expect(rows).toEqual([{ queue: 'all', job_name: 'job:webhook.test' }]);
  });

  it('does nothing and asks nothing of Postgres for an empty webhook batch', async () => {
    expect(
      await applier.apply({ source: 'none', receivedVia: 'webhook', events: [], quarantine: [] }),
    ).toEqual({
      status: 'applied',
      inserted: [],
      duplicates: 0,
      unstorable: [],
      quarantined: 0,
      conflicts: 0,
      firstConflicts: 0,
      contactsWithoutEmail: 0,
      outboxRows: 0,
      outbox: [],
    });
  });
});

describe('applier: quarantine', () => {
  it('keeps each raw text once per source, with its SHA-256', async () => {
    const raw = '{"type":"email.sent","created_at":"yesterday"}';
    const first = await applier.apply({
      source: 'q',
      receivedVia: 'feed',
      events: [],
      quarantine: [
        { raw, reason: 'bad created_at' },
        { raw, reason: 'bad created_at' },
        { raw: '[]', reason: 'not an object' },
      ],
    });
    expect(first.quarantined).toBe(2);
    const second = await applier.apply({
      source: 'q',
      receivedVia: 'feed',
      events: [],
      quarantine: [{ raw, reason: 'again' }],
    });
    expect(second.quarantined).toBe(0);

    const { rows } = await store.pool.query(
      `SELECT raw, raw_sha256, reason FROM ${store.schema}.quarantine WHERE source = 'q' ORDER BY id`,
    );
    expect(rows).toEqual([
      { raw, raw_sha256: createHash('sha256').update(raw).digest('hex'), reason: 'bad created_at' },
      { raw: '[]', raw_sha256: createHash('sha256').update('[]').digest('hex'), reason: 'not an object' },
    ]);
  });

  it('quarantines an event Postgres cannot store (a NUL character) and stores the rest', async () => {
    const bad = event('nul', 'webhook.test', '2024-01-01T00:00:00Z', { note: 'a\u0000b' });
    const textual = event('text', 'webhook.test', '2024-01-01T00:00:00Z', { note: 'a\\u0000b' });
    const result = await applier.apply({
      source: 'nul',
      receivedVia: 'webhook',
      events: [bad, textual],
      quarantine: [{ raw: 'x\u0000y', reason: 'not JSON' }],
    });
    expect(result).toMatchObject({ inserted: [textual], duplicates: 0, quarantined: 2 });
    const { rows } = await store.pool.query(
      `SELECT raw, reason FROM ${store.schema}.quarantine WHERE source = 'nul' ORDER BY id`,
    );
    expect(rows[0].raw).toBe(JSON.stringify(bad));
    expect(rows[0].reason).toMatch(/NUL/);
    expect(rows[1].raw).toBe('x\\u0000y');
  });
});

describe('applier: cursor compare-and-set', () => {
  it('moves the cursor with the batch, and keeps nothing of a batch whose cursor moved meanwhile', async () => {
    await ensureCursor(store, 'cas', null);
    const page1 = [
      event('p1', 'email.sent', '2024-03-01T00:00:00Z', { email_id: 'm1', to: ['a@example.com'] }),
    ];
    expect(
      await applier.apply({
        source: 'cas',
        receivedVia: 'feed',
        events: page1,
        quarantine: [],
        cursor: { prev: null, next: 'p1' },
      }),
    ).toMatchObject({ status: 'applied', inserted: page1, outboxRows: 1 });
    expect(await getCursor(store, 'cas')).toMatchObject({ afterId: 'p1' });
    const before = await counts('cas');

    const stale = await applier.apply({
      source: 'cas',
      receivedVia: 'feed',
      events: [
        event('p2', 'email.delivered', '2024-03-01T00:00:01Z', { email_id: 'm1', to: ['a@example.com'] }),
      ],
      quarantine: [{ raw: 'garbage', reason: 'not JSON' }],
      cursor: { prev: null, next: 'p2' },
    });
    expect(stale).toEqual({
      status: 'cursor-conflict',
      inserted: [],
      duplicates: 0,
      unstorable: [],
      quarantined: 0,
      conflicts: 0,
      firstConflicts: 0,
      contactsWithoutEmail: 0,
      outboxRows: 0,
      outbox: [],
    });
    expect(await counts('cas')).toEqual(before);
    expect(await getCursor(store, 'cas')).toMatchObject({ afterId: 'p1' });
    const { rows } = await store.pool.query(
      `SELECT status FROM ${store.schema}.email_status WHERE source = 'cas'`,
    );
    expect(rows).toEqual([{ status: 'sent' }]);
  });

  it('treats a missing cursor row as a conflict', async () => {
    const result = await applier.apply({
      source: 'no-cursor',
      receivedVia: 'feed',
      events: [event('z', 'webhook.test', '2024-01-01T00:00:00Z')],
      quarantine: [],
      cursor: { prev: null, next: 'z' },
    });
    expect(result.status).toBe('cursor-conflict');
    expect((await counts('no-cursor')).events).toBe(0);
  });

  it('lets exactly one of two racing writers with the same expected cursor win', async () => {
    await ensureCursor(store, 'race', null);
    const batch = (prefix: string) =>
      Array.from({ length: 50 }, (_, i) =>
        event(`${prefix}${i}`, 'email.sent', '2024-04-01T00:00:00Z', { email_id: `${prefix}m${i}`, to: [] }),
      );
    const [x, y] = await Promise.all(
      ['x', 'y'].map((p) =>
        applier.apply({
          source: 'race',
          receivedVia: 'feed',
          events: batch(p),
          quarantine: [],
          cursor: { prev: null, next: `${p}49` },
        }),
      ),
    );
    expect([x!.status, y!.status].sort()).toEqual(['applied', 'cursor-conflict']);
    const winner = x!.status === 'applied' ? 'x' : 'y';
    expect(await getCursor(store, 'race')).toMatchObject({ afterId: `${winner}49` });
    expect(await counts('race')).toEqual({ events: 50, outbox: 50, quarantine: 0, emailStatus: 50 });
  });

  it('quarantines an event with a lone UTF-16 surrogate (jsonb refuses it) and keeps a pair', async () => {
    const lone = event('lone', 'webhook.test', '2024-01-01T00:00:00Z', { note: 'a\ud800b' });
    const pair = event('pair', 'webhook.test', '2024-01-01T00:00:00Z', { note: 'smile \ud83d\ude00' });
    const result = await applier.apply({
      source: 'surrogate',
      receivedVia: 'feed',
      events: [lone, pair],
      quarantine: [],
    });
    expect(result).toMatchObject({ inserted: [pair], quarantined: 1 });
    const { rows } = await store.pool.query(
      `SELECT raw FROM ${store.schema}.quarantine WHERE source = 'surrogate'`,
    );
    expect(rows.map((r) => r.raw)).toEqual([JSON.stringify(lone)]);
  });
});
