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
});
