import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { progressReporter } from '../../src/cli/progress.js';
import type { CommitInfo } from '../../src/sync/catch-up.js';
import { createSync } from '../../src/sync/sync.js';
import { testConfig, testEnv } from '../support/config.js';
import { runCli } from '../support/processes.js';
import { useSimulator } from '../support/simulator.js';
import { captureLogger, useSandboxes } from '../sync/harness.js';

const sim = useSimulator({ backlog: 250 });
const sandbox = useSandboxes();

/** A stream that says it is a terminal, keeping what is drawn on it. */
function terminal(): { stream: NodeJS.WriteStream; text: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk, _enc, cb) {
      text += String(chunk);
      cb();
    },
  }) as unknown as NodeJS.WriteStream;
  (stream as { isTTY: boolean }).isTTY = true;
  return { stream, text: () => text };
}

describe('reconcile on a terminal', () => {
  it('reports every commit to the progress line, as sync does', async () => {
    const box = await sandbox('cli_progress');
    const config = testConfig({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl });
    const commits: CommitInfo[] = [];
    const screen = terminal();
    const progress = progressReporter(screen.stream);
    const sync = createSync(config, {
      logger: captureLogger().logger,
      hooks: {
        onCommit: (info) => {
          commits.push(info);
          progress.onCommit(info);
        },
      },
    });
    try {
      const result = await sync.reconcile(null);
      progress.done();
      expect(result.stored).toBe(250);
      expect(commits.reduce((n, c) => n + c.result.inserted.length, 0)).toBe(250);
      expect(screen.text()).toMatch(/pages \d+ {2}events 250 {2}duplicates 0 {2}\d+ events\/s\n$/);
    } finally {
      await sync.close();
    }
  });
});

describe('sync --once', () => {
  it("draws the progress line once at the end, not again after the run's last log lines", () => {
    const screen = terminal();
    const progress = progressReporter(screen.stream);
    progress.onCommit({
      pages: 1,
      filteredOut: 0,
      cursor: 'e1',
      result: { inserted: [], duplicates: 3 } as unknown as CommitInfo['result'],
    });
    progress.done();
    const once = screen.text();
    progress.done();
    expect(screen.text()).toBe(once);
    expect(once.endsWith('\n')).toBe(true);
  });

  it('ends off a terminal with one plain line of what it stored, as migrate and reconcile do', async () => {
    const box = await sandbox('cli_summary');
    const env = {
      PATH: process.env.PATH ?? '',
      ...testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl }),
    };
    const first = await runCli(['sync', '--once'], env);
    expect(first.code, first.stderr).toBe(0);
    const plain = first.stdout.split('\n').filter((l) => l !== '' && !l.startsWith('{'));
    expect(plain).toEqual([
      'sync caught up: 250 events stored, 0 already stored, 0 quarantined, 3 pages read; outbox handed over',
    ]);
    const again = await runCli(['sync', '--once'], env);
    expect(again.stdout).toContain(
      'sync caught up: 0 events stored, 0 already stored, 0 quarantined, 1 pages read',
    );
  });
});
