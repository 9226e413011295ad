import { afterAll, describe, expect, it } from 'vitest';
import { createSync } from '../../src/sync/sync.js';
import { testConfig, testEnv } from '../support/config.js';
import { CLI, killChildren, spawnNode, waitFor } from '../support/processes.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import {
  captureLogger,
  expectExactlyOnce,
  expectStoredUpToCursor,
  positionOf,
  type Sandbox,
  storedCount,
  useSandboxes,
  waitForWorkersGone,
} from './harness.js';

const BACKLOG = 8000;
const LIMIT = 100;
// With 50 ms a page, the catch-up lasts seconds: the signal lands in the middle of it.
const sim = useSimulator({ backlog: BACKLOG, faults: { latencyMs: 50 } });
const sandbox = useSandboxes();
const logs = captureLogger();
afterAll(killChildren);

function startWorker(box: Sandbox) {
  const env = testEnv(
    { schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl },
    { LOG_LEVEL: 'info' },
  );
  return spawnNode([CLI, 'sync', '--once'], env);
}

/** Runs the rest of the feed in this process, without latency, and checks the end state. */
async function finishAndCheck(box: Sandbox): Promise<void> {
  const before = await storedCount(box.store);
  sim().setFaults({ latencyMs: 0 });
  const sync = createSync(testConfig({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl }), {
    logger: logs.logger,
    store: box.store,
  });
  try {
    expect(await sync.runOnce()).toMatchObject({
      status: 'caught-up',
      drained: true,
      stored: BACKLOG - before,
    });
  } finally {
    await sync.close();
    sim().setFaults({ latencyMs: 50 });
  }
  await expectExactlyOnce({ store: box.store, prefix: box.prefix, expected: BACKLOG });
  expect(sim().stats().emails_sent).toBe(0);
  expect(logs.text()).not.toContain(TEST_API_KEY);
}

describe('SIGTERM during a catch-up', () => {
  it('exits 0 within 10 s, with the cursor on the last stored page boundary', async () => {
    const box = await sandbox('sigterm_once');
    const child = startWorker(box);
    await waitFor(async () => (await storedCount(box.store)) > 0, { what: 'the first commit' });
    child.signal('SIGTERM');
    // The contract's bound; a slower exit fails here.
    const result = await child.waitExit(10_000);
    expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0);
    expect(result.stdout).toContain('stopping after the page in hand');
    expect(`${result.stdout}${result.stderr}`).not.toContain(TEST_API_KEY);

    const cursor = await expectStoredUpToCursor(box.store);
    expect(cursor).not.toBeNull();
    const position = positionOf(cursor!);
    expect(position % LIMIT, 'commits end on page boundaries').toBe(0);
    expect(position, 'stopped before the end').toBeLessThan(BACKLOG);
    await finishAndCheck(box);
  });

  it('a second SIGTERM exits at once, even while the page in hand cannot commit', async () => {
    const box = await sandbox('sigterm_twice');
    const child = startWorker(box);
    await waitFor(async () => (await storedCount(box.store)) > 0, { what: 'the first commit' });
    // Hold the cursor row: the worker's next commit waits on it, so the first signal cannot finish.
    const blocker = await box.store.pool.connect();
    try {
      await blocker.query('BEGIN');
      await blocker.query(`SELECT 1 FROM "${box.schema}".cursors WHERE source = 'default' FOR UPDATE`);
      await waitFor(() => blocked(box), { what: 'a commit waiting on the cursor row' });
      child.signal('SIGTERM');
      await waitFor(() => child.stdout().includes('stopping after the page in hand'), {
        what: 'the first signal',
      });
      expect(child.process.exitCode).toBeNull();
      child.signal('SIGTERM');
      const result = await child.waitExit(5_000);
      expect(result.code).not.toBe(0);
      expect(result.stdout).toContain('second signal: exiting now');
    } finally {
      await blocker.query('ROLLBACK');
      blocker.release();
    }
    // The dead worker's statement may still finish once the row is free; wait for it.
    await waitForWorkersGone(box.store);
    await expectStoredUpToCursor(box.store);
    await finishAndCheck(box);
  });
});

/** A statement of the worker waits on a lock. */
async function blocked(box: Sandbox): Promise<boolean> {
  const { rows } = await box.store.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE application_name = 'feedsync' AND wait_event_type = 'Lock' AND query LIKE $1`,
    [`%"${box.schema}"%`],
  );
  return rows[0]!.n > 0;
}
