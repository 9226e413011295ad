import { afterAll, describe, expect, it } from 'vitest';
import type { StatusReport } from '../../src/cli/status-report.js';
import { overdueSources } from '../../src/store/lease-statements.js';
import { testEnv } from '../support/config.js';
import { CLI, killChildren, runCli, spawnNode, waitFor } from '../support/processes.js';
import { useSimulator } from '../support/simulator.js';
import { useSandboxes } from './harness.js';

const sim = useSimulator({ backlog: 20 });
const sandbox = useSandboxes();
afterAll(killChildren);

/** The watch's line that says when the next source is due, if it said one. */
function dueLine(stdout: string): { msg: string; nextDueInMs?: number } | undefined {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg: string; nextDueInMs?: number })
    .find((l) => l.msg.startsWith('no source is due yet'));
}

describe('when a source is next due', () => {
  it('status shows it after a once run, and a watch started then says how long it waits', async () => {
    const box = await sandbox('next_due');
    const env = {
      PATH: process.env.PATH ?? '',
      ...testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl }),
      SYNC_INTERVAL_MS: '30000',
      LOG_LEVEL: 'info',
    };
    const once = await runCli(['sync', '--once'], env);
    expect(once.code, once.stderr).toBe(0);

    const json = await runCli(['status', '--json'], env);
    const [source] = (JSON.parse(json.stdout) as StatusReport).sources;
    const dueIn = Date.parse(source?.nextDueAt ?? '') - Date.now();
    expect(dueIn).toBeGreaterThan(0);
    expect(dueIn).toBeLessThanOrEqual(30_000);
    const text = await runCli(['status'], env);
    // Its last turn was a once run's: a CronJob's source, which no watch is late with.
    expect(source).toMatchObject({ lastTurnBy: 'once', overdue: false });
    // Long past due: still no watch's to be late with, until a watch turned it.
    await box.store.pool.query(`UPDATE "${box.schema}".leases SET due_at = now() - interval '1 day'`);
    expect(await overdueSources(box.store, 30_000)).toBe(0);
    await box.store.pool.query(`UPDATE "${box.schema}".leases SET last_turn = 'watch'`);
    expect(await overdueSources(box.store, 30_000)).toBe(1);
    await box.store.pool.query(
      `UPDATE "${box.schema}".leases SET due_at = now() + interval '30 seconds', last_turn = 'once'`,
    );
    expect(text.stdout).toContain(
      `  next turn       at the next sync --once (its last turn was one); a sync --watch would take it at ${source?.nextDueAt}`,
    );

    const watch = spawnNode([CLI, 'sync', '--watch'], env);
    try {
      await waitFor(() => watch.stdout().includes('no source is due yet'), {
        timeoutMs: 20_000,
        what: 'the watch saying when the next source is due',
      });
      const line = dueLine(watch.stdout());
      expect(line?.nextDueInMs).toBeGreaterThan(0);
      expect(line?.nextDueInMs).toBeLessThanOrEqual(30_000);
      expect(line?.msg).toMatch(
        /^no source is due yet: the next is due in \d+\.\d s, SYNC_INTERVAL_MS after/,
      );
    } finally {
      watch.signal('SIGTERM');
      await watch.waitExit(20_000);
    }
  }, 90_000);

  it('a watch with a shorter SYNC_INTERVAL_MS than the run before it goes by its own interval', async () => {
    const box = await sandbox('next_due_shorter');
    const env = {
      PATH: process.env.PATH ?? '',
      ...testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl }),
      LOG_LEVEL: 'info',
    };
    const once = await runCli(['sync', '--once'], { ...env, SYNC_INTERVAL_MS: '600000' });
    expect(once.code, once.stderr).toBe(0);
    const successAt = async () =>
      (
        await box.store.pool.query<{ at: Date }>(`SELECT last_success_at AS at FROM "${box.schema}".cursors`)
      ).rows[0]?.at.getTime();
    const before = await successAt();

    const watch = spawnNode([CLI, 'sync', '--watch'], { ...env, SYNC_INTERVAL_MS: '2000' });
    try {
      // The once run stored its source due in 10 minutes; the watch's interval is 2 s.
      await waitFor(async () => ((await successAt()) ?? 0) > (before ?? 0), {
        timeoutMs: 30_000,
        what: 'a turn of the watch, within its own interval',
      });
      const line = dueLine(watch.stdout());
      if (line) expect(line.nextDueInMs).toBeLessThanOrEqual(2_000);
    } finally {
      watch.signal('SIGTERM');
      await watch.waitExit(20_000);
    }
  }, 90_000);
});
