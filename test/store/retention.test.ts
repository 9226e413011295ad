import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplier } from '../../src/store/applier.js';
import type { Store } from '../../src/store/db.js';
import { pruneExpired } from '../../src/store/retention.js';
import { createSync } from '../../src/sync/sync.js';
import { testConfig, testEnv } from '../support/config.js';
import { runCli } from '../support/processes.js';
import { deletePrefix, uniquePrefix } from '../support/redis.js';
import { useSimulator } from '../support/simulator.js';
import { captureLogger } from '../sync/harness.js';
import { event, migratedStore, route } from './migrated-store.js';

const DAY = 86_400_000;
/** Five CLI processes start at once on a busy machine. */
const CLI_TIMEOUT_MS = 50_000;
const sim = useSimulator({ backlog: 40 });
const prefix = uniquePrefix('retention');
const logs = captureLogger('info');
let store: Store;
let dispose: () => Promise<void>;
let s: string;

beforeAll(async () => {
  ({ store, dispose } = await migratedStore('retention'));
  s = `"${store.schema}"`;
});
afterAll(async () => {
  await dispose();
  await deletePrefix(prefix);
});

const iso = (msAgo: number): string => new Date(Date.now() - msAgo).toISOString();
const count = async (table: string, where = 'true'): Promise<number> =>
  Number(
    (await store.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${s}.${table} WHERE ${where}`)).rows[0]!
      .n,
  );

/**
 * Stores `n` email events of `source` that arrived `daysAgo` days ago (created `createdAt`, default the
 * same), one email each, their jobs published at `publishedDaysAgo` (default on arrival; null: not yet).
 */
async function storeAged(
  source: string,
  prefixId: string,
  n: number,
  daysAgo: number,
  opts: { createdAt?: string; publishedDaysAgo?: number | null } = {},
): Promise<void> {
  const events = Array.from({ length: n }, (_, i) =>
    event(
      `${prefixId}_${String(i).padStart(5, '0')}`,
      'email.delivered',
      opts.createdAt ?? iso(daysAgo * DAY + i * 1000),
      { email_id: `em_${prefixId}_${i}`, to: ['a@example.com'] },
    ),
  );
  await createApplier(store, route).apply({ source, receivedVia: 'feed', events, quarantine: [] });
  const like = [source, `${prefixId}\\_%`];
  // As the applier writes them: an outbox row's created_at is its event's received_at.
  await store.pool.query(
    `UPDATE ${s}.events SET received_at = now() - make_interval(secs => $3 * 86400 - ord)
       FROM (SELECT id AS oid, row_number() OVER (ORDER BY id) AS ord FROM ${s}.events WHERE source = $1 AND id LIKE $2) o
      WHERE source = $1 AND id = o.oid`,
    [...like, daysAgo],
  );
  await store.pool.query(
    `UPDATE ${s}.outbox o SET created_at = e.received_at FROM ${s}.events e
      WHERE e.source = o.source AND e.id = o.event_id AND o.source = $1 AND o.event_id LIKE $2`,
    like,
  );
  const published = opts.publishedDaysAgo === undefined ? daysAgo : opts.publishedDaysAgo;
  if (published !== null) {
    await store.pool.query(
      `UPDATE ${s}.outbox SET published_at = now() - make_interval(days => $3)
        WHERE source = $1 AND event_id LIKE $2 AND published_at IS NULL`,
      [...like, published],
    );
  }
}

const ids = async (where: string): Promise<string[]> =>
  (await store.pool.query<{ id: string }>(`SELECT id FROM ${s}.events WHERE ${where} ORDER BY id`)).rows.map(
    (r) => r.id,
  );

describe('pruneExpired', () => {
  it("deletes every source's events, quarantine and conflicts that arrived before the retention, in batches; keeps email_status, outbox, newer rows and events whose job is not published", async () => {
    await store.pool.query(`DELETE FROM ${s}.outbox`);
    await storeAged('a', 'old', 250, 40);
    await storeAged('a', 'new', 30, 5);
    await storeAged('a', 'held', 3, 40, { publishedDaysAgo: null });
    // A source no worker syncs any more: pruned all the same.
    await storeAged('gone', 'old', 20, 40);
    await store.pool.query(
      `INSERT INTO ${s}.quarantine (source, raw, raw_sha256, reason, received_at)
       VALUES ('a', 'x', 'h1', 'test', now() - interval '40 days'), ('a', 'y', 'h2', 'test', now())`,
    );
    await store.pool.query(
      `INSERT INTO ${s}.conflicts (source, event_id, first_sha256, second_sha256, raw, received_via, received_at)
       VALUES ('a', 'new_00001', 'f', 's1', '{}', 'feed', now() - interval '40 days'),
              ('a', 'new_00002', 'f', 's2', '{}', 'webhook', now())`,
    );
    // Published rows older than OUTBOX_RETENTION_HOURS are gone, as pruneOutbox leaves them.
    await store.pool.query(`DELETE FROM ${s}.outbox WHERE published_at < now() - interval '7 days'`);
    const batches: number[] = [];
    const result = await pruneExpired(store, {
      days: 30,
      outboxHours: 168,
      batchSize: 100,
      sleep: async () => {
        batches.push(await count('events'));
      },
    });
    expect(result).toEqual({ events: 270, quarantine: 1, conflicts: 1, done: true });
    // Two full batches of 100 paused between them; the third (70) ended the table.
    expect(batches).toEqual([203, 103]);
    expect(await count('events', `source = 'a'`)).toBe(33);
    expect(await count('events', `id LIKE 'old%'`)).toBe(0);
    // The relay still reads the job's data of these from the event.
    expect(await count('events', `source = 'a' AND id LIKE 'held%'`)).toBe(3);
    expect(await count('email_status', `source = 'a'`)).toBe(283);
    expect(await count('quarantine', `source = 'a'`)).toBe(1);
    expect(await count('conflicts', `source = 'a'`)).toBe(1);
    expect(await pruneExpired(store, { days: 30, outboxHours: 168 })).toEqual({
      events: 0,
      quarantine: 0,
      conflicts: 0,
      done: true,
    });
  });

  it('stops between batches when the run is asked to stop, and the next call goes on', async () => {
    await storeAged('b', 'stop', 20, 40);
    await store.pool.query(`DELETE FROM ${s}.outbox WHERE source = 'b'`);
    const stop = new AbortController();
    const first = await pruneExpired(store, {
      days: 30,
      outboxHours: 168,
      batchSize: 8,
      signal: stop.signal,
      sleep: async () => stop.abort(),
    });
    expect(first).toEqual({ events: 8, quarantine: 0, conflicts: 0, done: false });
    expect(await pruneExpired(store, { days: 30, outboxHours: 168, batchSize: 8 })).toMatchObject({
      events: 12,
      done: true,
    });
  });

  it('goes by arrival, not by the date the feed sent: 1969 and 9999 are pruned when they arrived long ago, an old event that just arrived stays and is a duplicate when it comes again', async () => {
    await store.pool.query(`DELETE FROM ${s}.outbox`);
    await storeAged('c', 'pre1970', 2, 40, { createdAt: '1969-07-20T20:17:40Z' });
    await storeAged('c', 'far', 2, 40, { createdAt: '9999-12-31T23:59:59Z' });
    await storeAged('c', 'late', 2, 0, { createdAt: '2001-01-01T00:00:00Z' });
    await store.pool.query(`DELETE FROM ${s}.outbox WHERE published_at < now() - interval '7 days'`);
    await pruneExpired(store, { days: 1, outboxHours: 0 });
    expect(await ids(`source = 'c'`)).toEqual(['late_00000', 'late_00001']);
    const again = await createApplier(store, route).apply({
      source: 'c',
      receivedVia: 'webhook',
      events: [
        event('late_00000', 'email.delivered', '2001-01-01T00:00:00Z', {
          email_id: 'em_late_0',
          to: ['a@example.com'],
        }),
      ],
      quarantine: [],
    });
    expect(again).toMatchObject({ inserted: [], duplicates: 1, outboxRows: 0 });
  });

  it('keeps an event at least as long as the webhook retry window, a completed job and a published outbox row, whatever EVENTS_RETENTION_DAYS says', async () => {
    await store.pool.query(`DELETE FROM ${s}.outbox`);
    // In the order they arrived, as the outbox's seq has them. Arrived 20 days ago, published late
    // (Redis was down) 2 days ago: requeue still reads its row.
    await storeAged('d', 'late', 2, 20, { publishedDaysAgo: 2 });
    await storeAged('d', 'ten', 2, 10);
    // Arrived 6 and 3 days ago: inside the seven days BullMQ keeps a completed job (its id de-duplicates).
    await storeAged('d', 'six', 2, 6);
    await storeAged('d', 'three', 2, 3);
    await pruneExpired(store, { days: 1, outboxHours: 24 * 14 });
    // The published row of ten days ago is inside OUTBOX_RETENTION_HOURS (14 days): its event stays.
    expect(await ids(`source = 'd'`)).toEqual([
      'late_00000',
      'late_00001',
      'six_00000',
      'six_00001',
      'ten_00000',
      'ten_00001',
      'three_00000',
      'three_00001',
    ]);
    await store.pool.query(`DELETE FROM ${s}.outbox WHERE published_at < now() - interval '7 days'`);
    await pruneExpired(store, { days: 1, outboxHours: 24 * 7 });
    // The late row is kept, and so is every event that arrived after it: no index leads from an
    // outbox row to its event, so the oldest kept published row bounds what goes.
    expect(await ids(`source = 'd' AND id LIKE 'ten%'`)).toEqual(['ten_00000', 'ten_00001']);
    expect(await count('outbox', `source = 'd' AND event_id LIKE 'late%'`)).toBe(2);
    // Once that row has had its OUTBOX_RETENTION_HOURS, its event and the ones behind it go.
    await store.pool.query(`DELETE FROM ${s}.outbox WHERE event_id LIKE 'late%'`);
    await pruneExpired(store, { days: 1, outboxHours: 24 * 7 });
    expect(await ids(`source = 'd'`)).toEqual(['six_00000', 'six_00001', 'three_00000', 'three_00001']);
    await store.pool.query(`DELETE FROM ${s}.outbox`);
  });
});

describe('EVENTS_RETENTION_DAYS in a run', () => {
  const config = (extra: Record<string, string> = {}) =>
    testConfig({ schema: store.schema, prefix, baseUrl: sim().baseUrl }, { FEED_SOURCE: 'sim', ...extra });

  it('a caught-up run prunes what has aged past the retention, and only with it set', async () => {
    const once = async (extra?: Record<string, string>) => {
      const sync = createSync(config(extra), { logger: logs.logger, store });
      try {
        return await sync.runOnce();
      } finally {
        await sync.close();
      }
    };
    expect(await once()).toMatchObject({ status: 'caught-up', stored: 40 });
    // Arrived ten days ago, and so did their outbox rows (written with them), published then.
    await store.pool.query(
      `UPDATE ${s}.events SET received_at = now() - interval '10 days' WHERE source = 'sim' AND id <= 'evt_000000000015'`,
    );
    await store.pool.query(
      `UPDATE ${s}.outbox SET created_at = now() - interval '10 days', published_at = now() - interval '10 days'
        WHERE source = 'sim' AND event_id <= 'evt_000000000015'`,
    );
    await once();
    expect(await count('events', `source = 'sim'`)).toBe(40);
    await once({ EVENTS_RETENTION_DAYS: '7' });
    expect(await count('events', `source = 'sim'`)).toBe(25);
    expect(await count('email_status', `source = 'sim'`)).toBeGreaterThan(0);
    expect(logs.text()).toContain('pruned rows older than EVENTS_RETENTION_DAYS');
  });

  it('cursor set, reconcile --from and reconcile from the start refuse a start older than the retention (exit 2)', async () => {
    const env = testEnv(
      { schema: store.schema, prefix, baseUrl: sim().baseUrl },
      { FEED_SOURCE: 'sim', EVENTS_RETENTION_DAYS: '7' },
    );
    await store.pool.query(
      `UPDATE ${s}.events SET received_at = now() - interval '8 days' WHERE source = 'sim' AND id = 'evt_000000000020'`,
    );
    const [setOld, setPruned, fromOld, fromStart, setRecent] = await Promise.all([
      runCli(['cursor', 'set', 'evt_000000000020'], env, CLI_TIMEOUT_MS),
      runCli(['cursor', 'set', 'evt_000000000003'], env, CLI_TIMEOUT_MS),
      runCli(['reconcile', '--from', 'evt_000000000020'], env, CLI_TIMEOUT_MS),
      runCli(['reconcile'], env, CLI_TIMEOUT_MS),
      runCli(['cursor', 'set', 'evt_000000000030'], env, CLI_TIMEOUT_MS),
    ]);
    for (const refused of [setOld, setPruned, fromOld, fromStart]) {
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr).toContain('EVENTS_RETENTION_DAYS (7)');
    }
    expect(setOld.stderr).toContain('older than EVENTS_RETENTION_DAYS (7)');
    expect(setPruned.stderr).toContain('may have been pruned');
    expect(fromStart.stderr).toContain('give --from');
    expect(setRecent.code, setRecent.stderr).toBe(0);
  }, 60_000);
});
