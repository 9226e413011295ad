import { afterAll, beforeAll, expect, it } from 'vitest';
import { createApplier } from '../../src/store/applier.js';
import { event, route } from '../store/migrated-store.js';
import { testConfig } from '../support/config.js';
import { uniqueSchema } from '../support/postgres.js';
import { waitFor } from '../support/processes.js';
import { uniquePrefix } from '../support/redis.js';
import {
  captureLogger,
  count,
  deliver,
  emailEvent,
  SECRET_NEW,
  startTestReceiver,
  type TestReceiver,
} from './helpers.js';

const schema = uniqueSchema('wh_retention');
const prefix = uniquePrefix('wh-retention');
const logs = captureLogger();
let receiver: TestReceiver;

beforeAll(async () => {
  const config = testConfig(
    { schema, prefix },
    { WEBHOOK_SECRET: SECRET_NEW, EVENTS_RETENTION_DAYS: '1', OUTBOX_RETENTION_HOURS: '24' },
  );
  receiver = await startTestReceiver(config, logs.logger, {
    connections: 4,
    schema,
    prefix,
    retentionIntervalMs: 300,
  });
});
afterAll(async () => {
  await receiver.close();
});

it('serve-webhooks alone prunes every source, one no worker syncs too; a delivery dated long ago is kept, and its retry is a duplicate', async () => {
  const { store, pool } = receiver;
  const s = `"${schema}"`;
  // Events of this source and of one removed from the sources file, arrived 20 days ago.
  for (const source of ['default', 'removed']) {
    await createApplier(store, route).apply({
      source,
      receivedVia: 'feed',
      events: [1, 2, 3].map((i) =>
        event(`old_${i}`, 'email.delivered', '2020-01-01T00:00:00Z', { email_id: `em_old_${i}` }),
      ),
      quarantine: [],
    });
  }
  await store.pool.query(`UPDATE ${s}.events SET received_at = now() - interval '20 days'`);
  await store.pool.query(
    `UPDATE ${s}.outbox SET created_at = now() - interval '20 days', published_at = now() - interval '20 days'`,
  );
  await waitFor(async () => (await count(store, 'events')) === 0 && (await count(store, 'outbox')) === 0, {
    timeoutMs: 30_000,
    what: 'the old events and their published outbox rows pruned',
  });

  // Dated 2020, delivered now, and again (the service retries for a day): stored once, one job.
  const body = JSON.stringify(emailEvent('email.bounced', { created_at: '2020-03-01T00:00:00Z' }));
  expect((await deliver(pool, body)).status).toBe(200);
  // Rounds of pruning every 300 ms pass over it in between.
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  expect((await deliver(pool, body)).status).toBe(200);
  expect(await count(store, 'events')).toBe(1);
  expect(await count(store, 'outbox')).toBe(1);
}, 60_000);
