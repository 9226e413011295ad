import { describe, expect, it } from 'vitest';
import { jobIdFor } from '../../src/queue/routes.js';
import { createSync } from '../../src/sync/sync.js';
import { testConfig } from '../support/config.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import {
  CONTACT_QUEUE,
  captureLogger,
  cursorOf,
  EMAIL_QUEUE,
  expectExactlyOnce,
  lose,
  queuedJobIds,
  useSandboxes,
} from './harness.js';

const sim = useSimulator({ backlog: 600 });
const sandbox = useSandboxes();
const logs = captureLogger();

const id = (position: number): string => `evt_${String(position).padStart(12, '0')}`;

describe('reconcile', () => {
  it('stores and enqueues exactly what was missing, and never moves the cursor', async () => {
    const contact = sim().emitContactEvent('contact.subscribed', 'new@example.com');
    const total = sim().stats().events;
    const box = await sandbox('reconcile');
    const config = testConfig({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl });
    const sync = createSync(config, { logger: logs.logger, store: box.store });
    try {
      expect(await sync.runOnce()).toMatchObject({ status: 'caught-up', stored: total, drained: true });
      const cursor = await cursorOf(box.store);
      expect(cursor).toBe(contact.id);

      await lose(box, [id(5), id(150), id(151), id(420), contact.id]);
      const jobsLeft = (await queuedJobIds(box.prefix, EMAIL_QUEUE)).length;
      expect(jobsLeft).toBe(total - 1 - 4);

      // From a later point, only what lies after it comes back.
      const later = await sync.reconcile(id(300));
      expect(later).toMatchObject({ status: 'caught-up', stored: 2, duplicates: total - 300 - 2 });
      expect(await cursorOf(box.store)).toBe(cursor);
      expect(await queuedJobIds(box.prefix, CONTACT_QUEUE)).toEqual([jobIdFor('default', contact.id)]);

      const all = await sync.reconcile(null);
      expect(all).toMatchObject({ status: 'caught-up', stored: 3, duplicates: total - 3, quarantined: 0 });
      expect(await cursorOf(box.store)).toBe(cursor);
      await expectExactlyOnce({ store: box.store, prefix: box.prefix, expected: total });

      // Nothing missing: nothing stored, nothing enqueued twice.
      expect(await sync.reconcile(null)).toMatchObject({ stored: 0, duplicates: total });
      await expectExactlyOnce({ store: box.store, prefix: box.prefix, expected: total });
    } finally {
      await sync.close();
    }
    expect(sim().stats().emails_sent).toBe(0);
    expect(logs.text()).not.toContain(TEST_API_KEY);
  });
});
