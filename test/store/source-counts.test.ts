import { afterAll, beforeAll, expect, it } from 'vitest';
import { createApplier } from '../../src/store/applier.js';
import type { Store } from '../../src/store/db.js';
import { pruneExpired } from '../../src/store/retention.js';
import { event, migratedStore, route } from './migrated-store.js';

let store: Store;
let dispose: () => Promise<void>;
beforeAll(async () => {
  ({ store, dispose } = await migratedStore('source_counts'));
});
afterAll(async () => {
  await dispose();
});

/** Each source's kept count against its rows in events, and its newest event's date. */
async function counts(): Promise<{ source: string; kept: number; rows: number; newest: string | null }[]> {
  const s = store.schema;
  const { rows } = await store.pool.query<{
    source: string;
    kept: string;
    rows: string;
    newest: Date | null;
  }>(
    `SELECT c.source, c.events_stored AS kept, c.newest_event_at AS newest,
       (SELECT count(*) FROM ${s}.events e WHERE e.source = c.source) AS rows
     FROM ${s}.source_counts c ORDER BY c.source`,
  );
  return rows.map((r) => ({
    source: r.source,
    kept: Number(r.kept),
    rows: Number(r.rows),
    newest: r.newest?.toISOString() ?? null,
  }));
}

it('the statement that stores events counts them per source, duplicates and future dates aside, and pruning takes them off', async () => {
  const applier = createApplier(store, route);
  const at = (day: number) => `2024-03-${String(day).padStart(2, '0')}T00:00:00.000Z`;
  await applier.apply({
    source: 'a',
    receivedVia: 'webhook',
    events: [
      event('a1', 'email.sent', at(1)),
      event('a2', 'email.sent', at(3)),
      event('a3', 'other.x', at(2)),
    ],
    quarantine: [],
  });
  // Two already stored, one new; and one dated in the future, which the lag leaves out.
  await applier.apply({
    source: 'a',
    receivedVia: 'webhook',
    events: [
      event('a1', 'email.sent', at(1)),
      event('a2', 'email.sent', at(3)),
      event('a4', 'email.sent', '9999-01-01T00:00:00.000Z'),
    ],
    quarantine: [],
  });
  await applier.apply({
    source: 'b',
    receivedVia: 'feed',
    events: [event('b1', 'email.sent', at(5))],
    quarantine: [],
  });
  expect(await counts()).toEqual([
    { source: 'a', kept: 4, rows: 4, newest: at(3) },
    { source: 'b', kept: 1, rows: 1, newest: at(5) },
  ]);

  // Three of a's rows and b's one arrived long ago, their jobs published: pruning deletes
  // them and takes them off the counts.
  const s = store.schema;
  await store.pool.query(
    `UPDATE ${s}.events SET received_at = now() - interval '40 days' WHERE id IN ('a1', 'a2', 'a3', 'b1')`,
  );
  await store.pool.query(
    `UPDATE ${s}.outbox SET created_at = now() - interval '40 days', published_at = now() - interval '40 days'`,
  );
  expect(await pruneExpired(store, { days: 30, outboxHours: 0, batchSize: 2 })).toMatchObject({ events: 4 });
  expect(await counts()).toEqual([
    // The newest date stays: the lag is that of the newest event ever stored.
    { source: 'a', kept: 1, rows: 1, newest: at(3) },
    { source: 'b', kept: 0, rows: 0, newest: at(5) },
  ]);
});
