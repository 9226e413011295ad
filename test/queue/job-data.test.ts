import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normaliseTimestamp } from '../../src/feed/timestamp.js';
import { jobData } from '../../src/queue/job-data.js';
import { createApplier } from '../../src/store/applier.js';
import type { Store } from '../../src/store/db.js';
import { jobDataSql } from '../../src/store/event-json.js';
import { event, migratedStore, route } from '../store/migrated-store.js';

let store: Store;
let dispose: () => Promise<void>;

beforeAll(async () => {
  ({ store, dispose } = await migratedStore('job_data'));
});
afterAll(() => dispose());

describe('job data: from memory and from the events table, the same', () => {
  // The relay publishes a committed batch from memory; rows a crash left behind, and
  // requeue, build the data in SQL from the stored event. A consumer must not see two forms.
  it.each([
    '2024-05-01T10:00:00.123Z',
    '2024-05-01T10:00:00Z',
    '2024-05-01T10:00:00.120Z',
    '2024-05-01T10:00:00.123456Z',
    '2024-05-01T10:00:00.000001Z',
    '2024-05-01T10:00:00.1234567Z',
    '2024-05-01T10:00:00.5+02:00',
    '2016-12-31T23:59:60.25Z',
    '0050-03-01T00:30:00+01:00',
    '9999-12-31T23:59:59.999999Z',
  ])('created_at %s', async (text) => {
    const createdAt = normaliseTimestamp(text)!;
    const e = event(`evt_${text}`, 'email.sent', createdAt, {
      email_id: 'em_1',
      to: ['a@example.com'],
      nested: { n: 1.5, list: [true, null, 'x'] },
    });
    await createApplier(store, route).apply({
      source: 'jd',
      receivedVia: 'feed',
      events: [e],
      quarantine: [],
    });
    // The session's time zone must not matter.
    const client = await store.pool.connect();
    try {
      await client.query(`SET TIME ZONE 'America/St_Johns'`);
      const { rows } = await client.query(
        `SELECT ${jobDataSql('e')} AS data FROM ${store.schema}.events e WHERE e.source = 'jd' AND e.id = $1`,
        [e.id],
      );
      expect(rows[0].data).toEqual(jobData('jd', e));
    } finally {
      await client.query('RESET TIME ZONE');
      client.release();
    }
  });
});
