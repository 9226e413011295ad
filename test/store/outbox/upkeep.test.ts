import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createApplier } from '../../../src/store/applier.js';
import type { Store } from '../../../src/store/db.js';
import {
  firstKeptPublishedCreatedAt,
  outboxBacklog,
  outboxBacklogBySource,
  outboxSummary,
} from '../../../src/store/outbox.js';
import { event, migratedStore, route } from '../migrated-store.js';

let store: Store;
let dispose: () => Promise<void>;
let t: string;

beforeAll(async () => {
  ({ store, dispose } = await migratedStore('outbox_upkeep'));
  t = `"${store.schema}".outbox`;
});
afterAll(async () => {
  await dispose();
});
beforeEach(async () => {
  await store.pool.query(`TRUNCATE "${store.schema}".events, ${t}`);
});

/** Stores `n` routed events of `source`; their outbox rows wait unpublished. */
async function stored(source: string, n: number): Promise<void> {
  const events = Array.from({ length: n }, (_, i) =>
    event(`${source}_${i}`, 'email.sent', '2024-01-01T00:00:00.000Z', { email_id: `em_${source}_${i}` }),
  );
  await createApplier(store, route).apply({ source, receivedVia: 'webhook', events, quarantine: [] });
}

describe('the outbox as status, doctor and retention read it', () => {
  it('counts the backlog per source, and over all of them', async () => {
    await stored('a', 3);
    await stored('b', 2);
    await store.pool.query(`UPDATE ${t} SET published_at = now() WHERE source = 'b'`);
    expect(await outboxBacklogBySource(store)).toEqual(new Map([['a', 3]]));
    expect(await outboxBacklog(store)).toBe(3);
  });

  it('sums up what waits, since when, and what is kept published', async () => {
    expect(await outboxSummary(store)).toEqual({ backlog: 0, oldestUnpublished: null, publishedKept: 0 });
    await stored('a', 3);
    await store.pool.query(
      `UPDATE ${t} SET created_at = now() - interval '1 day', published_at = now() WHERE event_id = 'a_0'`,
    );
    await store.pool.query(`UPDATE ${t} SET created_at = '2024-02-01T00:00:00Z' WHERE event_id = 'a_1'`);
    expect(await outboxSummary(store)).toEqual({
      backlog: 2,
      oldestUnpublished: new Date('2024-02-01T00:00:00Z'),
      publishedKept: 1,
    });
  });

  it('gives the created_at of the first row, by seq, published within the retention', async () => {
    await stored('a', 3);
    await store.pool.query(
      `UPDATE ${t} SET created_at = '2024-03-01T00:00:00Z', published_at = now() - interval '3 hours' WHERE event_id = 'a_0'`,
    );
    await store.pool.query(
      `UPDATE ${t} SET created_at = '2024-03-02T00:00:00Z', published_at = now() WHERE event_id = 'a_1'`,
    );
    expect(await firstKeptPublishedCreatedAt(store, 24)).toEqual(new Date('2024-03-01T00:00:00Z'));
    expect(await firstKeptPublishedCreatedAt(store, 2)).toEqual(new Date('2024-03-02T00:00:00Z'));
    await store.pool.query(`UPDATE ${t} SET published_at = NULL`);
    expect(await firstKeptPublishedCreatedAt(store, 24)).toBeNull();
  });
});
