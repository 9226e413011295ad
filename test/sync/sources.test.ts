import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StatusReport } from '../../src/cli/status-report.js';
import type { Simulator } from '../../src/simulator/index.js';
import { testEnv } from '../support/config.js';
import { freePort, killChildren, runCli } from '../support/processes.js';
import { startTestSimulator } from '../support/simulator.js';
import { cursorOf, expectExactlyOnce, storedCount, useSandboxes } from './harness.js';

/**
 * Many sources in one sync run, against one simulator with an account per key. Each
 * account has its own backlog size, and event ids repeat across them (every feed
 * starts at evt_000000000001): a worker that mixed two sources up would store the
 * wrong counts under a source, or move one source's cursor with another's ids.
 */
const GOOD = 8;
const backlogOf = (i: number): number => 40 * (i + 1) + i;
const keyOf = (i: number): string => `acct_test_key${i}_${Math.random().toString(36).slice(2, 12)}`;
const id = (position: number): string => `evt_${String(position).padStart(12, '0')}`;

const sandbox = useSandboxes();
const dir = mkdtempSync(join(tmpdir(), 'feedsync-sources-'));
let sim: Simulator;
const keys = Array.from({ length: GOOD }, (_, i) => keyOf(i));
const REJECTED_KEY = 'not-a-valid-key-0123456789';
let deadUrl = '';

beforeAll(async () => {
  sim = await startTestSimulator();
  for (let i = 0; i < GOOD; i++) sim.account(keys[i]!).setBacklog(backlogOf(i));
  deadUrl = `http://127.0.0.1:${await freePort()}/api`;
});
afterAll(async () => {
  await killChildren();
  await sim.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Half the keys come from files (mounted secrets), half from variables. */
function goodEntries(): { entries: object[]; env: Record<string, string> } {
  const env: Record<string, string> = {};
  const entries = keys.map((_, i) => {
    if (i % 2 === 0) {
      const file = join(dir, `key-${i}`);
      writeFileSync(file, `${keys[i]}\n`);
      return { source: `acct-${i}`, base_url: sim.baseUrl, api_key_file: file };
    }
    env[`ACCT_${i}_KEY`] = keys[i]!;
    return { source: `acct-${i}`, base_url: sim.baseUrl, api_key_env: `ACCT_${i}_KEY` };
  });
  return { entries, env };
}

function sourcesFile(name: string, entries: object[]): string {
  const file = join(dir, name);
  writeFileSync(file, JSON.stringify({ sources: entries }));
  return file;
}

interface Line {
  msg: string;
  source?: string;
  outcome?: string;
  stored?: number;
  [k: string]: unknown;
}

function lines(stdout: string): Line[] {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Line);
}

function expectNoKeys(text: string): void {
  for (const key of [...keys, REJECTED_KEY]) expect(text).not.toContain(key);
}

describe('sync --once over a sources file', () => {
  it('runs every source to caught-up beside a rejected key and an unreachable feed; exit codes 1, 3, 0', async () => {
    const box = await sandbox('sources_once');
    const { entries, env: keyEnv } = goodEntries();
    const rejected = { source: 'rejected', base_url: sim.baseUrl, api_key_env: 'REJECTED_KEY' };
    const unreachableKey = join(dir, 'key-unreachable');
    writeFileSync(unreachableKey, `${keys[0]}\n`);
    const unreachable = { source: 'unreachable', base_url: deadUrl, api_key_file: unreachableKey };
    const env = testEnv(
      { schema: box.schema, prefix: box.prefix },
      {
        ...keyEnv,
        REJECTED_KEY,
        LOG_LEVEL: 'info',
        SYNC_CONCURRENCY: '3',
        FEED_PAGE_LIMIT: '25',
        FEED_MAX_RETRIES: '1',
        FEED_SOURCES_FILE: sourcesFile('all.json', [rejected, ...entries, unreachable]),
      },
    );

    const first = await runCli(['sync', '--once'], env, 60_000);
    expect(first.code, first.stderr).toBe(1);
    const out = lines(first.stdout);
    const outcome = (source: string) => out.find((l) => l.source === source && l.outcome)?.outcome;
    for (let i = 0; i < GOOD; i++) {
      expect(outcome(`acct-${i}`), `summary line of acct-${i}`).toBe('caught-up');
      expect(await cursorOf(box.store, `acct-${i}`)).toBe(id(backlogOf(i)));
      await expectExactlyOnce({
        store: box.store,
        prefix: box.prefix,
        expected: backlogOf(i),
        source: `acct-${i}`,
      });
    }
    expect(outcome('rejected')).toBe('failed');
    expect(outcome('unreachable')).toBe('failed');
    expect(out.find((l) => l.source === 'rejected' && l.outcome)?.msg).toMatch(/rejected the API key/);
    expect(out.find((l) => l.msg === 'sync run finished')).toMatchObject({
      sources: GOOD + 2,
      caught_up: GOOD,
      failed: 2,
      not_started: 0,
    });
    expect(await storedCount(box.store, 'rejected')).toBe(0);
    expect(await storedCount(box.store, 'unreachable')).toBe(0);
    expectNoKeys(first.stdout + first.stderr);

    // Only a rejected key beside good sources: exit 3; the good ones have nothing new.
    const keyOnly = { ...env, FEED_SOURCES_FILE: sourcesFile('rejected.json', [...entries, rejected]) };
    const second = await runCli(['sync', '--once'], keyOnly, 60_000);
    expect(second.code, second.stderr).toBe(3);
    expect(lines(second.stdout).find((l) => l.msg === 'sync run finished')).toMatchObject({
      events_stored: 0,
    });
    expectNoKeys(second.stdout + second.stderr);

    const good = { ...env, FEED_SOURCES_FILE: sourcesFile('good.json', entries) };
    const third = await runCli(['sync', '--once'], good, 60_000);
    expect(third.code, third.stderr).toBe(0);
    for (let i = 0; i < GOOD; i++) expect(await storedCount(box.store, `acct-${i}`)).toBe(backlogOf(i));

    // status lists every source of the file and of the cursors table.
    const status = await runCli(['status', '--json'], keyOnly, 60_000);
    expect(status.code, status.stderr).toBe(0);
    const report = JSON.parse(status.stdout) as StatusReport;
    expect(report.sources.map((s) => s.source).sort()).toEqual(
      [...entries.map((_, i) => `acct-${i}`), 'rejected', 'unreachable'].sort(),
    );
    expectNoKeys(status.stdout + status.stderr);
  }, 240_000);

  it('every command that acts on a source takes --source, and refuses one not in the file', async () => {
    const box = await sandbox('sources_cmds');
    const { entries, env: keyEnv } = goodEntries();
    const env = testEnv(
      { schema: box.schema, prefix: box.prefix },
      { ...keyEnv, FEED_SOURCES_FILE: sourcesFile('cmds.json', entries.slice(0, 3)) },
    );
    expect((await runCli(['cursor', 'set', id(5), '--source', 'acct-2'], env, 60_000)).code).toBe(0);
    expect(await cursorOf(box.store, 'acct-2')).toBe(id(5));
    const reconcile = await runCli(['reconcile', '--source', 'acct-1'], env, 60_000);
    expect(reconcile.code, reconcile.stderr).toBe(0);
    expect(await storedCount(box.store, 'acct-1')).toBe(backlogOf(1));
    const unknown = await runCli(['cursor', 'reset', '--source', 'acct-7'], env, 60_000);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(
      /source "acct-7" is not in FEED_SOURCES_FILE \(acct-0, acct-1, acct-2\); did you mean "acct-0"\?/,
    );
    expect(await cursorOf(box.store, 'acct-7')).toBeNull();
    // Without --source, FEED_SOURCE (default) is none of the file's: the line says to pass one.
    const unnamed = await runCli(['cursor', 'show'], env, 60_000);
    expect(unnamed.code).toBe(2);
    expect(unnamed.stderr).toContain('FEED_SOURCE "default" is not in FEED_SOURCES_FILE: pass --source');
    for (const args of [['cursor', 'show'], ['status'], ['sync', '--once'], ['requeue', '--since', '1h']]) {
      const refused = await runCli([...args, '--source', 'acct-7'], env, 60_000);
      expect(refused.code, `${args.join(' ')}: ${refused.stderr}`).toBe(2);
      expect(refused.stderr).toMatch(/source "acct-7" is not in FEED_SOURCES_FILE/);
    }
    // sync --source runs that source alone; status --source shows it alone.
    const alone = await runCli(['sync', '--once', '--source', 'acct-0'], env, 60_000);
    expect(alone.code, alone.stderr).toBe(0);
    expect(await cursorOf(box.store, 'acct-0')).toBe(id(backlogOf(0)));
    expect(await cursorOf(box.store, 'acct-1')).toBeNull();
    const status = await runCli(['status', '--json', '--source', 'acct-0'], env, 60_000);
    expect(status.code, status.stderr).toBe(0);
    expect((JSON.parse(status.stdout) as StatusReport).sources.map((s) => s.source)).toEqual(['acct-0']);
  }, 180_000);

  it('a key file missing or empty fails that source alone, every turn, named in the summary and status', async () => {
    const box = await sandbox('sources_keyfile');
    const { entries, env: keyEnv } = goodEntries();
    const empty = join(dir, 'key-empty');
    writeFileSync(empty, '\n');
    const broken = [
      { source: 'no-file', base_url: sim.baseUrl, api_key_file: join(dir, 'key-nope') },
      { source: 'empty-file', base_url: sim.baseUrl, api_key_file: empty },
    ];
    const env = testEnv(
      { schema: box.schema, prefix: box.prefix },
      {
        ...keyEnv,
        LOG_LEVEL: 'info',
        FEED_SOURCES_FILE: sourcesFile('keyfiles.json', [...broken, ...entries]),
      },
    );
    for (let turn = 0; turn < 2; turn++) {
      const run = await runCli(['sync', '--once'], env, 60_000);
      // Only configuration failed: exit 2, the good sources caught up all the same.
      expect(run.code, run.stderr).toBe(2);
      const out = lines(run.stdout);
      for (const b of broken) {
        expect(out.find((l) => l.source === b.source && l.outcome)?.outcome).toBe('failed');
        expect(run.stderr).toContain(`feedsync: source ${b.source}: api_key_file`);
        expect(run.stderr).not.toContain(`source "${b.source}"`);
      }
      for (let i = 0; i < GOOD; i++) expect(await cursorOf(box.store, `acct-${i}`)).toBe(id(backlogOf(i)));
    }
    const status = await runCli(['status', '--json'], env, 60_000);
    const report = JSON.parse(status.stdout) as StatusReport;
    const failing = report.sources.filter((s) => s.failuresInRow > 0);
    expect(failing.map((s) => [s.source, s.failuresInRow])).toEqual([
      ['empty-file', 2],
      ['no-file', 2],
    ]);
    expect(failing[0]!.lastError).toMatch(/api_key_file: the file is empty/);
    expect(failing[1]!.lastError).toMatch(/api_key_file cannot be read \(ENOENT\)/);
    expectNoKeys(status.stdout + status.stderr);
  }, 180_000);

  it('a bad sources file stops every command at start with exit 2, naming the entry and the field', async () => {
    const env = testEnv(
      { schema: 'unused_schema', prefix: 'unused' },
      {
        FEED_SOURCES_FILE: sourcesFile('bad.json', [{ source: 'a', api_key_env: 'NOPE', base_url: deadUrl }]),
      },
    );
    for (const args of [['sync', '--once'], ['status']]) {
      const res = await runCli(args, env, 60_000);
      expect(res.code).toBe(2);
      expect(res.stderr.trim()).toMatch(
        /^feedsync: FEED_SOURCES_FILE .*bad\.json: sources\[0\] \("a"\): api_key_env: /,
      );
      expect(res.stderr.trim().split('\n')).toHaveLength(1);
    }
  }, 120_000);
});
