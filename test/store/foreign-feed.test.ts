import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceEvent } from '../../src/api/types.js';
import { type Applier, createApplier } from '../../src/store/applier.js';
import { FOREIGN_FEED_MIN } from '../../src/store/foreign-feed.js';
import { event, migratedStore, route } from './migrated-store.js';

/**
 * Where "mostly conflicts" begins (src/store/foreign-feed.ts): on one page, at least
 * FOREIGN_FEED_MIN events stored before with other content, and more than half of the
 * page. Such a page stores nothing of its batch; a page under the rule stores as before.
 */
let applier: Applier;
let db: Awaited<ReturnType<typeof migratedStore>>;
beforeAll(async () => {
  db = await migratedStore('foreign_feed');
  applier = createApplier(db.store, route);
});
afterAll(() => db.dispose());

const id = (source: string, n: number) => `${source}_${String(n).padStart(4, '0')}`;
const version = (source: string, n: number, subject: string): ServiceEvent =>
  event(id(source, n), 'email.sent', '2026-01-01T00:00:00Z', { email_id: `em_${n}`, subject });

/** Stores events 1..stored of `source`, then offers one page of `size` events whose first `changed` come back with other content. */
async function pageWith(source: string, stored: number, size: number, changed: number) {
  const first = Array.from({ length: stored }, (_, i) => version(source, i + 1, 'first'));
  expect((await applier.apply({ source, receivedVia: 'feed', events: first, quarantine: [] })).status).toBe(
    'applied',
  );
  const page = Array.from({ length: size }, (_, i) =>
    version(source, i + 1, i < changed ? 'other' : 'first'),
  );
  // A page before it in the same batch, all new: the rule is per page, and the whole batch stores nothing.
  const before = Array.from({ length: 5 }, (_, i) => version(source, 9000 + i, 'new'));
  return applier.apply({
    source,
    receivedVia: 'feed',
    events: [...before, ...page],
    quarantine: [],
    pageStarts: [0, before.length],
  });
}

async function storedIds(source: string): Promise<number> {
  const { rows } = await db.store.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${db.store.schema}".events WHERE source = $1`,
    [source],
  );
  return rows[0]!.n;
}

describe('a page mostly of conflicts', () => {
  it('more than half of a page, and at least FOREIGN_FEED_MIN: nothing of the batch is stored', async () => {
    const result = await pageWith('half_plus', 20, 20, 11);
    expect(result.status).toBe('foreign-feed');
    expect(result.foreign).toEqual({ conflicts: 11, events: 20 });
    expect(result.inserted).toEqual([]);
    expect(await storedIds('half_plus')).toBe(20);
  });

  it('exactly half is not "mostly": stored, the conflicts recorded as before', async () => {
    const result = await pageWith('half', 20, 20, 10);
    expect(result.status).toBe('applied');
    expect(result.conflicts).toBe(10);
    expect(result.inserted).toHaveLength(5);
  });

  it('fewer than FOREIGN_FEED_MIN conflicts, even a whole page of them, is not "mostly"', async () => {
    const n = FOREIGN_FEED_MIN - 1;
    const result = await pageWith('few', n, n, n);
    expect(result.status).toBe('applied');
    expect(result.conflicts).toBe(n);
  });

  it('a batch without pageStarts (a webhook delivery, a test) is never checked', async () => {
    const events = Array.from({ length: 12 }, (_, i) => version('hooks', i + 1, 'first'));
    await applier.apply({ source: 'hooks', receivedVia: 'webhook', events, quarantine: [] });
    const other = events.map((e) => ({ ...e, data: { ...e.data, subject: 'other' } }));
    const result = await applier.apply({
      source: 'hooks',
      receivedVia: 'webhook',
      events: other,
      quarantine: [],
    });
    expect(result).toMatchObject({ status: 'applied', conflicts: 12 });
  });
});
