import { describe, expect, it } from 'vitest';
import { formatStatus, statusReport } from '../../src/cli/status-report.js';
import type { Publisher } from '../../src/queue/publisher.js';
import { jobIdFor } from '../../src/queue/routes.js';
import { pruneExpired } from '../../src/store/retention.js';
import { createSync } from '../../src/sync/sync.js';
import type { VerifyResult } from '../../src/sync/verify.js';
import { testConfig, testEnv } from '../support/config.js';
import { runCli } from '../support/processes.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import {
  captureLogger,
  cursorOf,
  EMAIL_QUEUE,
  expectExactlyOnce,
  lose,
  queuedJobIds,
  type Sandbox,
  useSandboxes,
} from './harness.js';

const BACKLOG = 250;
const sim = useSimulator({ backlog: BACKLOG });
const sandbox = useSandboxes();
const logs = captureLogger();
const id = (position: number): string => `evt_${String(position).padStart(12, '0')}`;
const never = new AbortController().signal;

/** A synced sandbox and its sync; the caller closes the sync. */
async function synced(label: string, extra: Record<string, string> = {}) {
  const box = await sandbox(label);
  const config = testConfig({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl }, extra);
  const sync = createSync(config, { logger: logs.logger, store: box.store });
  expect(await sync.runOnce()).toMatchObject({ status: 'caught-up', stored: BACKLOG, drained: true });
  return { box, config, sync };
}

function cliEnv(box: Sandbox, extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    ...testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl }),
    ...extra,
  };
}

const noQueues = { counts: async () => ({}) } as unknown as Publisher;

describe('verify', () => {
  it('--repair stores and hands over the missing once, never overwrites a differing body', async () => {
    const { box, sync } = await synced('verify_repair');
    const s = `"${box.schema}"`;
    try {
      await lose(box, [id(37)]);
      await box.store.pool.query(
        `UPDATE ${s}.events SET data = data || '{"altered": true}' WHERE source = 'default' AND id = $1`,
        [id(200)],
      );
      const before = (await queuedJobIds(box.prefix, EMAIL_QUEUE)).length;

      const repaired = await sync.verify({ repair: true, signal: never });
      expect(repaired).toMatchObject({
        missing: { count: 1, first: [id(37)] },
        differing: { count: 1, first: [id(200)] },
        repaired: 1,
        ok: false,
      });
      // Stored once, one outbox row, one job; the cursor did not move.
      expect(await cursorOf(box.store)).toBe(id(BACKLOG));
      const jobs = await queuedJobIds(box.prefix, EMAIL_QUEUE);
      expect(jobs.length).toBe(before + 1);
      expect(jobs.filter((j) => j === jobIdFor('default', id(37)))).toHaveLength(1);
      const altered = await box.store.pool.query(
        `SELECT data->>'altered' AS a FROM ${s}.events WHERE id = $1`,
        [id(200)],
      );
      expect(altered.rows).toEqual([{ a: 'true' }]);

      // The second run finds nothing missing, and the differing body still there, still kept.
      const again = await runCli(['verify', '--repair'], cliEnv(box));
      expect(again.code, again.stderr).toBe(3);
      expect(again.stdout).toContain(`differing   1  ${id(200)} (kept as stored)`);
      expect(again.stdout).toContain('missing     0');
      expect((await queuedJobIds(box.prefix, EMAIL_QUEUE)).length).toBe(before + 1);

      await box.store.pool.query(`UPDATE ${s}.events SET data = data - 'altered' WHERE id = $1`, [id(200)]);
      const clean = await runCli(['verify'], cliEnv(box));
      expect(clean.code, clean.stderr).toBe(0);
      expect(clean.stdout).toContain('ok: the store matches the feed');
      await expectExactlyOnce({ store: box.store, prefix: box.prefix, expected: BACKLOG });
    } finally {
      await sync.close();
    }
  });

  it('does not count events the retention pruned as missing', async () => {
    const { box, sync } = await synced('verify_pruned', { EVENTS_RETENTION_DAYS: '1' });
    const s = `"${box.schema}"`;
    try {
      // The first 50 arrived a month ago: the retention prunes them (it keeps a week at least).
      await box.store.pool.query(
        `UPDATE ${s}.events SET received_at = now() - interval '30 days' WHERE id <= $1`,
        [id(50)],
      );
      expect((await pruneExpired(box.store, { days: 1, outboxHours: 0 })).events).toBe(50);

      // By default from the oldest event kept: the pruned ones are not read.
      const kept = await sync.verify({ repair: false, signal: never });
      expect(kept).toMatchObject({ from: id(51), checked: BACKLOG - 51, pruned: 0, ok: true });
      // From before them: read, counted as pruned, not missing.
      const all = await sync.verify({ from: id(1), repair: true, signal: never });
      expect(all).toMatchObject({
        checked: BACKLOG - 1,
        pruned: 49,
        missing: { count: 0 },
        repaired: 0,
        ok: true,
      });

      // One lost among the kept ones is missing all the same.
      await lose(box, [id(80)]);
      const lost = await sync.verify({ from: id(1), repair: false, signal: never });
      expect(lost).toMatchObject({ pruned: 49, missing: { count: 1, first: [id(80)] }, ok: false });
    } finally {
      await sync.close();
    }
    expect(logs.text()).not.toContain(TEST_API_KEY);
  });

  it('finds a clean store complete up to the cursor, keeps the run for status, and a deleted row missing (exit 3)', async () => {
    const { box, config, sync } = await synced('verify_clean');
    try {
      const clean = await sync.verify({ repair: false, signal: never });
      expect(clean).toMatchObject({
        status: 'verified',
        from: null,
        cursor: id(BACKLOG),
        checked: BACKLOG,
        missing: { count: 0, first: [] },
        differing: { count: 0, first: [] },
        pruned: 0,
        repaired: 0,
        ok: true,
      });
      const report = await statusReport(config, box.store, noQueues);
      expect(report.sources[0]?.lastVerify).toMatchObject({ ok: true, missing: 0, differing: 0 });
      expect(formatStatus(report)).toMatch(/last verify {5}\S+ ok/);

      await lose(box, [id(120)]);
      const json = await runCli(['verify', '--json'], cliEnv(box));
      expect(json.code, json.stderr).toBe(3);
      const result = JSON.parse(json.stdout) as VerifyResult;
      expect(result).toEqual({
        source: 'default',
        status: 'verified',
        from: null,
        cursor: id(BACKLOG),
        pages: expect.any(Number),
        checked: BACKLOG,
        missing: { count: 1, first: [id(120)] },
        differing: { count: 0, first: [] },
        pruned: 0,
        repaired: 0,
        ok: false,
      });
      const text = await runCli(['verify'], cliEnv(box));
      expect(text.code, text.stderr).toBe(3);
      expect(text.stdout).toContain(`missing     1  ${id(120)}`);
      expect(text.stdout).toContain('NOT OK');
      const status = await runCli(['status', '--json'], cliEnv(box));
      expect(JSON.parse(status.stdout).sources[0].lastVerify).toMatchObject({ ok: false, missing: 1 });
      // Nothing of it was stored: verify alone never writes an event.
      expect(await queuedJobIds(box.prefix, EMAIL_QUEUE)).not.toContain(jobIdFor('default', id(120)));

      // Up to the cursor: what the feed has past it was not synced yet, so it is not missing.
      // (Last in the file: the event stays in the shared simulator's feed.)
      const later = sim().emitContactEvent('contact.subscribed', 'later@example.com');
      const beyond = await sync.verify({ repair: false, signal: never });
      expect(beyond).toMatchObject({ cursor: id(BACKLOG), checked: BACKLOG, missing: { count: 1 } });
      expect(beyond.missing.first).not.toContain(later.id);
      // An --from the feed does not know is a usage error (exit 2), nothing read.
      expect((await runCli(['verify', '--from', 'evt_nope'], cliEnv(box))).code).toBe(2);
    } finally {
      await sync.close();
    }
  });
});
