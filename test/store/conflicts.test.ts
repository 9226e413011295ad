import { createHash } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ServiceEvent } from '../../src/api/types.js';
import { formatStatus, statusReport } from '../../src/cli/status-report.js';
import { createLogger } from '../../src/logger.js';
import { dbGauges } from '../../src/metrics/db-gauges.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import type { Publisher } from '../../src/queue/publisher.js';
import { type Applier, createApplier, setCursor } from '../../src/store/index.js';
import { createSync } from '../../src/sync/sync.js';
import { testConfig } from '../support/config.js';
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
}

async function conflictsOf(source: string): Promise<ConflictRow[]> {
  const { rows } = await box.store.pool.query<ConflictRow>(
    // raw is jsonb; its text, which the hashes are of, is what jsonb prints.
    `SELECT event_id, first_sha256, second_sha256, raw::text AS raw, received_via FROM "${box.schema}".conflicts
      WHERE source = $1 ORDER BY id`,
    [source],
  );
  return rows;
}

const sha = (text: string) => createHash('sha256').update(text).digest('hex');
const apply = (source: string, via: 'feed' | 'webhook', events: ServiceEvent[]) =>
  applier.apply({ source, receivedVia: via, events, quarantine: [] });

describe('an id that comes back with other content', () => {
  it('keeps the first version and records every other version once, feed against webhook', async () => {
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
    });
    // The service retries the same delivery: counted as a duplicate, recorded once.
    expect(await apply('mixed', 'webhook', [second])).toMatchObject({ duplicates: 1, conflicts: 0 });
    expect(await apply('mixed', 'feed', [third])).toMatchObject({ duplicates: 1, conflicts: 1 });

    const rows = await conflictsOf('mixed');
    expect(rows.map((r) => [r.event_id, r.received_via])).toEqual([
      ['c1', 'webhook'],
      ['c1', 'feed'],
    ]);
    const [a, b] = rows as [ConflictRow, ConflictRow];
    expect(JSON.parse(a.raw)).toEqual({ ...second, created_at: '2024-05-01T10:00:00.000000Z' });
    expect(a.second_sha256).toBe(sha(a.raw));
    expect(b.first_sha256).toBe(a.first_sha256);
    expect(b.second_sha256).not.toBe(a.second_sha256);
    // raw is jsonb: an operator reads its fields in SQL.
    const { rows: fields } = await box.store.pool.query(
      `SELECT raw->>'created_at' AS created_at, raw->'data' AS data FROM "${box.schema}".conflicts
        WHERE source = 'mixed' ORDER BY id LIMIT 1`,
    );
    expect(fields).toEqual([{ created_at: '2024-05-01T10:00:00.000000Z', data: second.data }]);
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
        eventsStored: 2,
      });
      expect(formatStatus(report)).toMatch(/conflicts {7}1/);
    } finally {
      await sync.close();
      await feed.close();
    }
  });
});
