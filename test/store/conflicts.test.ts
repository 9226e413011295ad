import { createHash } from 'node:crypto';
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceEvent } from '../../src/api/types.js';
import { formatStatus, statusReport } from '../../src/cli/status-report.js';
import { createLogger } from '../../src/logger.js';
import { dbGauges } from '../../src/metrics/db-gauges.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import type { Publisher } from '../../src/queue/publisher.js';
import { type Applier, createApplier } from '../../src/store/applier.js';
import { setCursor } from '../../src/store/cursor.js';
import { createStore } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrate.js';
import { migrationNames } from '../../src/store/migration-files.js';
import { createSync } from '../../src/sync/sync.js';
import { testConfig } from '../support/config.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import { startFeedServer } from '../sync/feed-server.js';
import { type Sandbox, useSandboxes } from '../sync/harness.js';
import { event, route } from './migrated-store.js';

const sandbox = useSandboxes();
let box: Sandbox;
let applier: Applier;
beforeAll(async () => {
  box = await sandbox('conflicts');
  applier = createApplier(box.store, route);
});

interface ConflictRow {
  event_id: string;
  first_sha256: string;
  second_sha256: string;
  raw: string;
  received_via: string;
  versions_seen: number;
}

async function conflictsOf(source: string): Promise<ConflictRow[]> {
  const { rows } = await box.store.pool.query<ConflictRow>(
    // raw is jsonb; its text, which the hashes are of, is what jsonb prints.
    `SELECT event_id, first_sha256, second_sha256, raw::text AS raw, received_via, versions_seen::int
       FROM "${box.schema}".conflicts WHERE source = $1 ORDER BY id`,
    [source],
  );
  return rows;
}

const sha = (text: string) => createHash('sha256').update(text).digest('hex');
const apply = (source: string, via: 'feed' | 'webhook', events: ServiceEvent[]) =>
  applier.apply({ source, receivedVia: via, events, quarantine: [] });

describe('an id that comes back with other content', () => {
  it('keeps the first version and the newest other one, counting every version once, feed against webhook', async () => {
    const first = event('c1', 'email.delivered', '2024-05-01T10:00:00Z', {
      email_id: 'em_c1',
      to: ['a@example.com'],
    });
    const second = { ...first, data: { ...first.data, to: ['b@example.com'] } };
    const third = { ...first, type: 'email.bounced' };
    expect(await apply('mixed', 'feed', [first])).toMatchObject({ inserted: [first], conflicts: 0 });

    expect(await apply('mixed', 'webhook', [second])).toMatchObject({
      inserted: [],
      duplicates: 1,
      conflicts: 1,
      firstConflicts: 1,
    });
    const [a] = (await conflictsOf('mixed')) as [ConflictRow];
    expect(a).toMatchObject({ event_id: 'c1', received_via: 'webhook', versions_seen: 1 });
    expect(JSON.parse(a.raw)).toEqual({ ...second, created_at: '2024-05-01T10:00:00.000000Z' });
    expect(a.second_sha256).toBe(sha(a.raw));
    // raw is jsonb: an operator reads its fields in SQL.
    const { rows: fields } = await box.store.pool.query(
      `SELECT raw->>'created_at' AS created_at, raw->'data' AS data FROM "${box.schema}".conflicts
        WHERE source = 'mixed'`,
    );
    expect(fields).toEqual([{ created_at: '2024-05-01T10:00:00.000000Z', data: second.data }]);

    // The service retries the same delivery: counted as a duplicate, not as another version.
    expect(await apply('mixed', 'webhook', [second])).toMatchObject({ duplicates: 1, conflicts: 0 });
    // A third version replaces the second in the id's one row, and is counted; no new warning is due.
    expect(await apply('mixed', 'feed', [third])).toMatchObject({
      duplicates: 1,
      conflicts: 1,
      firstConflicts: 0,
    });
    const rows = await conflictsOf('mixed');
    expect(rows).toHaveLength(1);
    const [b] = rows as [ConflictRow];
    expect(b).toMatchObject({ event_id: 'c1', received_via: 'feed', versions_seen: 2 });
    expect(JSON.parse(b.raw)).toEqual({ ...third, created_at: '2024-05-01T10:00:00.000000Z' });
    expect(b.first_sha256).toBe(a.first_sha256);
    expect(b.second_sha256).toBe(sha(b.raw));
    // The first version stands everywhere: event, projection, outbox.
    const { rows: kept } = await box.store.pool.query(
      `SELECT e.data, s.status, s.recipients FROM "${box.schema}".events e
         JOIN "${box.schema}".email_status s ON s.source = e.source AND s.email_id = 'em_c1'
        WHERE e.source = 'mixed' AND e.id = 'c1'`,
    );
    expect(kept).toEqual([{ data: first.data, status: 'delivered', recipients: ['a@example.com'] }]);
  });

  it('is no conflict when only the spelling differs: key order, an offset for the same instant', async () => {
    const first = event('same', 'contact.subscribed', '2024-05-01T10:00:00Z', { a: 1, b: [1, 2] });
    await apply('spelling', 'feed', [first]);
    const respelled = { ...first, created_at: '2024-05-01T12:00:00+02:00', data: { b: [1, 2], a: 1 } };
    expect(await apply('spelling', 'webhook', [respelled])).toMatchObject({ duplicates: 1, conflicts: 0 });
    expect(await conflictsOf('spelling')).toEqual([]);
  });

  it('records a repeat within one batch against the batch first copy', async () => {
    const a = event('in', 'contact.subscribed', '2024-05-01T10:00:00Z', { n: 1 });
    const result = await apply('batch', 'feed', [a, { ...a, data: { n: 2 } }, a]);
    expect(result).toMatchObject({ inserted: [a], duplicates: 2, conflicts: 1 });
    expect((await conflictsOf('batch')).map((r) => JSON.parse(r.raw).data)).toEqual([{ n: 2 }]);
  });

  it('keeps one row per id however many versions come, in one batch or many; the newest stands', async () => {
    const a = event('many', 'contact.subscribed', '2024-05-01T10:00:00Z', { n: 0 });
    const v = (n: number) => ({ ...a, data: { n } });
    // In one batch: the first copy is stored, its other versions (one of them twice) are counted once each.
    expect(await apply('bounded', 'feed', [a, v(1), v(2), v(1), v(3)])).toMatchObject({
      inserted: [a],
      duplicates: 4,
      conflicts: 3,
      firstConflicts: 1,
    });
    // The version the row holds is no new one; the others are, even one replaced before.
    expect(await apply('bounded', 'webhook', [v(3)])).toMatchObject({ conflicts: 0 });
    expect(await apply('bounded', 'webhook', [v(3), v(4)])).toMatchObject({ conflicts: 1 });
    for (let n = 5; n < 40; n++) await apply('bounded', 'webhook', [v(n)]);
    expect(await apply('bounded', 'feed', [v(1)])).toMatchObject({ conflicts: 1, firstConflicts: 0 });
    const rows = await conflictsOf('bounded');
    expect(rows.map((r) => [r.event_id, r.versions_seen, JSON.parse(r.raw).data])).toEqual([
      ['many', 3 + 1 + 35 + 1, { n: 1 }],
    ]);
    const { rows: kept } = await box.store.pool.query(
      `SELECT data FROM "${box.schema}".events WHERE source = 'bounded'`,
    );
    expect(kept).toEqual([{ data: { n: 0 } }]);
  });
});

describe('conflicts an operator can see', () => {
  it('feedsync_events_conflict_total and status count the feed serving an id again with other content', async () => {
    const items: ServiceEvent[] = [
      event('f1', 'contact.subscribed', '2024-05-01T10:00:00Z', { v: 1 }),
      event('f2', 'contact.subscribed', '2024-05-01T10:00:01Z', { v: 1 }),
    ];
    const feed = await startFeedServer(items);
    const config = testConfig(
      { schema: box.schema, prefix: box.prefix, baseUrl: feed.baseUrl },
      { FEED_SOURCE: 'served' },
    );
    const metrics = createMetrics(dbGauges(box.store, ['served'], 30_000), ['served']);
    const sync = createSync(config, {
      logger: createLogger({ level: 'silent' }),
      store: box.store,
      hooks: metrics.hooksFor('served'),
    });
    try {
      await sync.runOnce();
      // The service serves f2 again, changed, to a replay from the start.
      items[1] = { ...items[1]!, data: { v: 2 } };
      await setCursor(box.store, 'served', null);
      await sync.runOnce();
      const metric = await metrics.registry.getSingleMetric('feedsync_events_conflict_total')?.get();
      expect(metric?.values.find((v) => v.labels.source === 'served')?.value).toBe(1);
      const report = await statusReport(config, box.store, {
        counts: async () => ({}),
      } as unknown as Publisher);
      expect(report.sources.find((s) => s.source === 'served')).toMatchObject({
        conflicts: 1,
        conflictIds: 1,
        eventsStored: 2,
      });
      expect(formatStatus(report)).toMatch(/conflicts {7}1/);
    } finally {
      await sync.close();
      await feed.close();
    }
  });
});

describe('migration 0007', () => {
  const schema = uniqueSchema('conflicts_0007');
  const store = createStore({ url: TEST_DATABASE_URL, schema, max: 1 });
  let folder = '';
  afterAll(async () => {
    await store.close();
    await dropSchema(schema);
    if (folder) await rm(folder, { recursive: true, force: true });
  });

  it('keeps the newest recorded version of each id and counts the others', async () => {
    folder = await mkdtemp(join(tmpdir(), 'feedsync-0007-'));
    const from = fileURLToPath(new URL('../../migrations/', import.meta.url));
    const names = await migrationNames();
    const copy = (name: string) => copyFile(join(from, `${name}.sql`), join(folder, `${name}.sql`));
    for (const name of names.filter((n) => n < '0007')) await copy(name);
    await migrate(store, { folder: pathToFileURL(`${folder}/`) });
    const t = `"${schema}".conflicts`;
    await store.pool.query(
      `INSERT INTO ${t} (source, event_id, first_sha256, second_sha256, raw, received_via)
       VALUES ('s', 'x', 'f', 'a', '{"v": 1}', 'feed'), ('s', 'x', 'f', 'b', '{"v": 2}', 'webhook'),
              ('s', 'y', 'f', 'a', '{"v": 1}', 'feed'), ('s', 'x', 'f', 'c', '{"v": 3}', 'feed')`,
    );
    await copy(names.find((n) => n.startsWith('0007_'))!);
    await migrate(store, { folder: pathToFileURL(`${folder}/`) });
    const { rows } = await store.pool.query(
      `SELECT event_id, second_sha256, raw, versions_seen::int FROM ${t} ORDER BY event_id`,
    );
    expect(rows).toEqual([
      { event_id: 'x', second_sha256: 'c', raw: { v: 3 }, versions_seen: 3 },
      { event_id: 'y', second_sha256: 'a', raw: { v: 1 }, versions_seen: 1 },
    ]);
    const again = store.pool.query(
      `INSERT INTO ${t} (source, event_id, first_sha256, second_sha256, raw, received_via)
       VALUES ('s', 'y', 'f', 'z', '{}', 'feed')`,
    );
    await expect(again).rejects.toMatchObject({ code: '23505' });
  });
});
