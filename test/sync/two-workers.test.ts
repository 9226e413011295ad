import { afterAll, describe, expect, it } from 'vitest';
import { testEnv } from '../support/config.js';
import { CLI, killChildren, spawnNode } from '../support/processes.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import { expectExactlyOnce, useSandboxes } from './harness.js';

const BACKLOG = 2000;
// Latency stretches each run over a second or two, so runs started together overlap.
const sim = useSimulator({ backlog: BACKLOG, faults: { latencyMs: 100 } });
const sandbox = useSandboxes();
afterAll(killChildren);

/** The fields of the CLI's closing JSON log line. */
interface RunLine {
  status: string;
  events_stored: number;
}

function finishedLine(stdout: string): RunLine {
  const line = stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg?: string })
    .find((l) => l.msg === 'sync run finished');
  if (!line) throw new Error(`no "sync run finished" line in:\n${stdout}`);
  return line as unknown as RunLine;
}

describe.concurrent('several `sync --once` processes at once on one source', () => {
  it.each([2, 3])(
    '%i workers: all exit 0, one does the work, every event stored and enqueued once',
    async (n) => {
      const box = await sandbox(`workers_${n}`);
      const env = testEnv(
        { schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl },
        { LOG_LEVEL: 'info' },
      );
      const children = Array.from({ length: n }, () => spawnNode([CLI, 'sync', '--once'], env));
      const results = await Promise.all(children.map((c) => c.waitExit(30_000)));

      for (const r of results) expect(r.code, r.stderr).toBe(0);
      const lines = results.map((r) => finishedLine(r.stdout));
      // Each event was stored by exactly one of them.
      expect(lines.reduce((sum, l) => sum + l.events_stored, 0)).toBe(BACKLOG);
      const stoppedEarly = results.filter(
        (r) =>
          r.stdout.includes('holds the lease of this source') ||
          r.stdout.includes('the cursor was moved outside this run'),
      );
      expect(stoppedEarly.length, 'a worker said another one holds the source').toBeGreaterThanOrEqual(1);
      expect(lines.filter((l) => l.events_stored > 0).length).toBeLessThanOrEqual(n - stoppedEarly.length);

      await expectExactlyOnce({ store: box.store, prefix: box.prefix, expected: BACKLOG });
      expect(sim().stats().emails_sent).toBe(0);
      for (const r of results) expect(`${r.stdout}${r.stderr}`).not.toContain(TEST_API_KEY);
    },
  );
});
