import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../src/api/client.js';
import { createStore, type Store } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrate.js';
import { createSync } from '../../src/sync/sync.js';
import { testConfig } from '../support/config.js';
import { captureLogger } from '../support/logs.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import { dropQueues, queuePrefix, testQueue } from '../support/queues.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';

const schema = uniqueSchema('sync_once');
const prefix = await queuePrefix('sync-once');
const sim = useSimulator({ backlog: 950 });
const logs = captureLogger({ secrets: [TEST_API_KEY] });
const logger = logs.logger;
let store: Store;

beforeAll(async () => {
  store = createStore({ url: TEST_DATABASE_URL, schema });
  await migrate(store);
});
afterAll(async () => {
  await store.close();
  await dropSchema(schema);
  await dropQueues(prefix);
});

async function queueCount(name: string): Promise<number> {
  const q = testQueue(name, prefix);
  try {
    const c = await q.getJobCounts('waiting', 'active', 'completed', 'failed', 'delayed');
    return Object.values(c).reduce((a, b) => a + b, 0);
  } finally {
    await q.close();
  }
}

describe('sync --once against the simulator', () => {
  it('stores every event once, enqueues every email and contact event once, and sends nothing', async () => {
    const client = new ServiceClient({ baseUrl: sim().baseUrl, apiKey: TEST_API_KEY });
    for (const to of [
      'delivered@example.com',
      'bounced@example.com',
      'complained@example.com',
      'failed@example.com',
    ]) {
      await client.sendEmail({ from: 'app@example.com', to: [to], subject: 's', html: '<p>x</p>' });
    }
    await client.close();
    sim().emitContactEvent('contact.subscribed', 'new@example.com');
    sim().emitContactEvent('contact.unsubscribed', 'old@example.com');
    const sentBefore = sim().stats().emails_sent;
    const total = sim().stats().events;

    const config = testConfig({ schema, prefix, baseUrl: sim().baseUrl });
    const sync = createSync(config, { logger, store });
    try {
      const first = await sync.runOnce();
      expect(first.status).toBe('caught-up');
      expect(first.drained).toBe(true);
      expect(first.stored).toBe(total);
      const second = await sync.runOnce();
      expect(second.stored).toBe(0);
      expect(second.cursor).toBe(first.cursor);
    } finally {
      await sync.close();
    }

    const { rows } = await store.pool.query(
      `SELECT count(*)::int AS n, count(DISTINCT id)::int AS d FROM "${schema}".events`,
    );
    expect(rows[0]).toEqual({ n: total, d: total });
    const outbox = await store.pool.query(
      `SELECT count(*)::int AS n, count(*) FILTER (WHERE published_at IS NULL)::int AS open FROM "${schema}".outbox`,
    );
    const emails = await queueCount(config.queues.emailEvents);
    const contacts = await queueCount(config.queues.contactEvents);
    expect(contacts).toBe(2);
    expect(emails + contacts).toBe(outbox.rows[0].n);
    expect(outbox.rows[0].open).toBe(0);
    const status = await store.pool.query(`SELECT email_id, status FROM "${schema}".email_status`);
    expect(status.rows.length).toBeGreaterThan(4);
    expect(sim().stats().emails_sent).toBe(sentBefore);
    expect(logs.text()).not.toContain(TEST_API_KEY);
  });
});
