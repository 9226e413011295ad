import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatStatus, statusReport } from '../../src/cli/status-report.js';
import type { Publisher } from '../../src/queue/publisher.js';
import { createApplier } from '../../src/store/applier.js';
import type { Store } from '../../src/store/db.js';
import { event, migratedStore, route } from '../store/migrated-store.js';
import { testConfig } from '../support/config.js';

let store: Store;
let dispose: () => Promise<void>;

beforeAll(async () => {
  ({ store, dispose } = await migratedStore('status_report'));
});
afterAll(async () => {
  await dispose();
});

const noQueues = { counts: async () => ({}) } as unknown as Publisher;

describe('statusReport', () => {
  it('lists a source that only has an outbox backlog, with that backlog', async () => {
    const events = ['w1', 'w2'].map((id) => event(id, 'email.sent', '2024-01-01T00:00:00.000Z'));
    await createApplier(store, route).apply({
      source: 'hooks',
      receivedVia: 'webhook',
      events,
      quarantine: [],
    });
    const config = testConfig({ schema: store.schema, prefix: 'status-report' }, { FEED_SOURCE: 'feed' });

    const report = await statusReport(config, store, noQueues);
    // hooks first: its newest event (2024) is over 30 minutes old, so it lags.
    expect(report.sources.map((s) => [s.source, s.outboxBacklog, s.eventsStored])).toEqual([
      ['hooks', 2, 2],
      ['feed', 0, 0],
    ]);
    expect(formatStatus(report)).toMatch(/source hooks\n(.*\n)*? {2}outbox backlog {2}2/);

    const only = await statusReport(config, store, noQueues, { only: 'feed' });
    expect(only.sources.map((s) => s.source)).toEqual(['feed']);
  });

  it('says which sources of the file are overdue: due for over an interval, or without a lease row', async () => {
    const own = await migratedStore('status_overdue');
    try {
      const config = testConfig(
        { schema: own.store.schema, prefix: 'status-overdue' },
        { FEED_SOURCE: 'late', SYNC_INTERVAL_MS: '60000' },
      );
      const t = `${own.store.schema}.leases`;
      await own.store.pool.query(
        `INSERT INTO ${t} (source, due_at) VALUES ('late', now() - interval '2 minutes')`,
      );
      const overdue = async () => (await statusReport(config, own.store, noQueues)).sources[0]!.overdue;
      expect(await overdue()).toBe(true);
      expect(formatStatus(await statusReport(config, own.store, noQueues))).toMatch(
        / {2}overdue {9}due for over/,
      );
      // Due 30 s ago, inside one interval: a claim may still come.
      await own.store.pool.query(`UPDATE ${t} SET due_at = now() - interval '30 seconds'`);
      expect(await overdue()).toBe(false);
      // No lease row at all: no worker will claim it until one makes the row.
      await own.store.pool.query(`DELETE FROM ${t}`);
      expect(await overdue()).toBe(true);
    } finally {
      await own.dispose();
    }
  });

  it('counts failing turns in words that agree: 1 turn, 2 turns', async () => {
    const own = await migratedStore('status_turns');
    try {
      const config = testConfig({ schema: own.store.schema, prefix: 'status-turns' }, { FEED_SOURCE: 'f' });
      const t = `${own.store.schema}.leases`;
      await own.store.pool.query(`INSERT INTO ${t} (source, failures, last_error) VALUES ('f', 1, 'down')`);
      expect(formatStatus(await statusReport(config, own.store, noQueues))).toContain(
        '1 turn in a row: down',
      );
      await own.store.pool.query(`UPDATE ${t} SET failures = 2`);
      expect(formatStatus(await statusReport(config, own.store, noQueues))).toContain(
        '2 turns in a row: down',
      );
    } finally {
      await own.dispose();
    }
  });
});
