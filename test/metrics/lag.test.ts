import { afterAll, beforeAll, expect, it } from 'vitest';
import { dbGauges } from '../../src/metrics/db-gauges.js';
import { createApplier } from '../../src/store/applier.js';
import type { Store } from '../../src/store/db.js';
import { event, migratedStore, route } from '../store/migrated-store.js';

let store: Store;
let dispose: () => Promise<void>;
beforeAll(async () => {
  ({ store, dispose } = await migratedStore('lag'));
});
afterAll(async () => dispose());

it('a created_at in the future from the feed cannot hold the lag below zero: the newest event dated up to now counts', async () => {
  const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
  await createApplier(store, route).apply({
    source: 's',
    receivedVia: 'feed',
    events: [
      event('e1', 'email.sent', hourAgo, { email_id: 'm1' }),
      event('e2', 'email.delivered', '9999-12-31T23:59:59Z', { email_id: 'm1' }),
    ],
    quarantine: [],
  });
  const lag = (await dbGauges(store, ['s'], 30_000).cursorLagSeconds()).get('s');
  expect(lag).toBeGreaterThanOrEqual(3_600);
  expect(lag).toBeLessThan(3_600 + 600);
});
