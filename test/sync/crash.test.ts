import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSync } from '../../src/sync/sync.js';
import { testConfig, testEnv } from '../support/config.js';
import { killChildren, runNode, SYNC_WORKER } from '../support/processes.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import {
  captureLogger,
  expectExactlyOnce,
  expectStoredUpToCursor,
  outboxBacklogOf,
  storedCount,
  useSandboxes,
  waitForWorkersGone,
} from './harness.js';

// A few thousand events: several pages per commit and several addBulk batches per run.
const sim = useSimulator({ backlog: 2500 });
const sandbox = useSandboxes();
const logs = captureLogger();
let total = 0;

beforeAll(() => {
  sim().emitContactEvent('contact.subscribed', 'new@example.com');
  sim().emitContactEvent('contact.unsubscribed', 'old@example.com');
  total = sim().stats().events;
});
afterAll(killChildren);

/**
 * CRASH_AT points of test/children/sync-worker.mjs: SIGKILL once the N-th page is
 * fetched, right after the N-th commit, right after the N-th addBulk (before the
 * rows are marked published), or right before the N-th addBulk.
 */
const POINTS = [
  'after-fetch:1',
  'after-fetch:6',
  'after-commit:1',
  'after-commit:3',
  'after-add:1',
  'after-add:2',
  'before-add:1',
  'before-add:2',
];

describe('a worker killed with SIGKILL', () => {
  it.each(POINTS)('at %s: after a rerun every event is stored once and enqueued once', async (point) => {
    const box = await sandbox(`crash_${point.replace(/\W/g, '_')}`);
    const env = testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl });
    const sentBefore = sim().stats().emails_sent;

    const crashed = await runNode([SYNC_WORKER], { ...env, CRASH_AT: point });
    expect(crashed.signal, `the worker reached ${point}\n${crashed.stderr}`).toBe('SIGKILL');
    await waitForWorkersGone(box.store);
    // What the killed run left is consistent: the cursor covers exactly what is stored.
    await expectStoredUpToCursor(box.store);
    const storedAtCrash = await storedCount(box.store);
    if (point.startsWith('after-add') || point.startsWith('before-add')) {
      expect(await outboxBacklogOf(box.store), 'rows left to publish').toBeGreaterThan(0);
    }

    // The rerun, in this process (the child's code is the same; the CLI's own runs are tested elsewhere).
    const sync = createSync(testConfig({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl }), {
      logger: logs.logger,
      store: box.store,
    });
    try {
      const rerun = await sync.runOnce();
      expect(rerun).toMatchObject({ status: 'caught-up', drained: true, stored: total - storedAtCrash });
    } finally {
      await sync.close();
    }
    expect(storedAtCrash).toBeLessThanOrEqual(total);
    await expectExactlyOnce({ store: box.store, prefix: box.prefix, expected: total });
    expect(sim().stats().emails_sent).toBe(sentBefore);
    expect(`${crashed.stdout}${crashed.stderr}${logs.text()}`).not.toContain(TEST_API_KEY);
  });
});
