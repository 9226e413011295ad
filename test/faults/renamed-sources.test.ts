import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import type { StatusReport } from '../../src/cli/status-report.js';
import { killChildren, runCli } from '../support/processes.js';
import { queuedJobIds } from './support/fate.js';
import { feedEvents, startFeedServer } from './support/feed-server.js';
import { measured } from './support/results.js';
import { useSandboxes } from './support/sandbox.js';

const sandbox = useSandboxes();
const dir = mkdtempSync(join(tmpdir(), 'feedsync-renamed-'));
afterAll(async () => {
  await killChildren();
  rmSync(dir, { recursive: true, force: true });
});

const COUNT = 500;

/** A sources file naming `sources`, each with the environment's key and base URL. */
function sourcesFile(name: string, sources: readonly string[]): string {
  const path = join(dir, `${name}.json`);
  writeFileSync(path, JSON.stringify({ sources: sources.map((source) => ({ source })) }));
  return path;
}

it('47. a replica whose sources file still names a renamed or retired source refuses it and reads nothing', async () => {
  await measured(
    {
      item: 47,
      title: 'a replica whose sources file still names a renamed or retired source',
      claim:
        '`sources rename` and `sources retire` leave a mark on the old name: a replica whose sources file still ' +
        'names it (its ConfigMap not rolled out) refuses that source at its first turn, says why on stderr, in its ' +
        'log and in `status`, and reads nothing of its feed; the renamed source goes on from its cursor under the ' +
        'new name. No event is stored or enqueued twice.',
      method:
        `A feed server of ${COUNT} events; replica A and replica B both sync sources acme and globex to the end ` +
        "(`sync --once`, each its own sources file); A's file becomes acme-eu alone, `sources rename acme acme-eu` " +
        'and `sources retire globex` run; then replica B, whose file still names acme and globex, and replica A run again.',
    },
    async (rec) => {
      rec.injectedWhat = 'stale sources files';
      const served = feedEvents(COUNT);
      const feed = await startFeedServer(served);
      const box = await sandbox('renamed_sources');
      const s = `"${box.schema}"`;
      const envOf = (file: string) => box.env(feed.baseUrl, { FEED_SOURCES_FILE: file, HOSTNAME: file });
      const fileB = sourcesFile('b', ['acme', 'globex']);
      const storedBy = async (): Promise<Record<string, number>> => {
        const { rows } = await box.store.pool.query<{ source: string; n: number }>(
          `SELECT source, count(*)::int AS n FROM ${s}.events GROUP BY source`,
        );
        return Object.fromEntries(rows.map((r) => [r.source, r.n]));
      };
      try {
        const first = await runCli(['sync', '--once'], envOf(sourcesFile('a', ['acme', 'globex'])), 120_000);
        expect(first.code, first.stderr).toBe(0);
        const fileA = sourcesFile('a', ['acme-eu']);
        const rename = await runCli(['sources', 'rename', 'acme', 'acme-eu'], envOf(fileA));
        expect(rename.code, rename.stderr).toBe(0);
        const retire = await runCli(['sources', 'retire', 'globex'], envOf(fileA));
        expect(retire.code, retire.stderr).toBe(0);

        const requestsBefore = feed.requests;
        const stale = await runCli(['sync', '--once'], { ...envOf(fileB), LOG_LEVEL: 'info' }, 60_000);
        const requestsByStale = feed.requests - requestsBefore;
        const status = await runCli(['status', '--json', '--all'], envOf(fileB));
        const report = JSON.parse(status.stdout) as StatusReport;
        const errorOf = (source: string) => report.sources.find((x) => x.source === source)?.lastError ?? '';
        const current = await runCli(['sync', '--once'], envOf(fileA), 60_000);
        const stored = await storedBy();
        const jobs = {
          acme: (await queuedJobIds(box, 'acme')).length,
          acmeEu: (await queuedJobIds(box, 'acme-eu')).length,
          globex: (await queuedJobIds(box, 'globex')).length,
        };
        const { rows: cursors } = await box.store.pool.query<{ source: string }>(
          `SELECT source FROM ${s}.cursors ORDER BY source`,
        );
        rec.injected = 2;
        rec.checked = COUNT * 2;
        rec.lost = Math.max(0, COUNT - (stored['acme-eu'] ?? 0)) + Math.max(0, COUNT - jobs.acme);
        rec.duplicated =
          (stored.acme ?? 0) +
          Math.max(0, (stored.globex ?? 0) - COUNT) +
          jobs.acmeEu +
          Math.max(0, jobs.globex - COUNT);
        rec.figures = [
          [
            'stale replica: exit code / feed requests it made',
            `${stale.code ?? 'signal'} / ${requestsByStale}`,
          ],
          ['current replica: exit code', current.code ?? 'signal'],
          [
            'events stored under acme / acme-eu / globex',
            `${stored.acme ?? 0} / ${stored['acme-eu'] ?? 0} / ${stored.globex ?? 0}`,
          ],
          ['jobs of acme / acme-eu / globex', `${jobs.acme} / ${jobs.acmeEu} / ${jobs.globex}`],
        ];
        expect(stale.code, stale.stderr).toBe(2);
        expect(requestsByStale).toBe(0);
        expect(stale.stderr).toContain('source acme: source acme was renamed to acme-eu');
        expect(stale.stderr).toContain('source globex: source globex was retired');
        expect(stale.stdout).toContain('SOURCE_RETIRED');
        expect(errorOf('acme')).toContain('renamed to acme-eu');
        expect(errorOf('globex')).toContain('was retired');
        expect(current.code, current.stderr).toBe(0);
        expect(cursors.map((c) => c.source)).toEqual(['acme-eu']);
        expect(stored).toEqual({ 'acme-eu': COUNT, globex: COUNT });
        expect(jobs).toEqual({ acme: COUNT, acmeEu: 0, globex: COUNT });
        expect(rec.lost + rec.duplicated).toBe(0);
      } finally {
        await feed.close();
      }
    },
  );
});
