import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mapBounded } from '../../src/doctor/bounded.js';
import { createStore } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrate.js';
import { testEnv } from '../support/config.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import { runCli } from '../support/processes.js';
import { deletePrefix, uniquePrefix } from '../support/redis.js';
import { startTestSimulator } from '../support/simulator.js';

const schema = uniqueSchema('doctor_sources');
const prefix = uniquePrefix('doctor_sources');
const dir = mkdtempSync(join(tmpdir(), 'feedsync-doctor-sources-'));
// The simulator accepts acme_… keys only: a key of another account is rejected (401).
const GOOD_A = 'acme_test_aaaaaaaa';
const GOOD_B = 'acme_test_bbbbbbbb';
const GOOD_C = 'acme_test_cccccccc';
const REJECTED = 'other_test_rejected1';
let sim: Awaited<ReturnType<typeof startTestSimulator>>;

beforeAll(async () => {
  const store = createStore({ url: TEST_DATABASE_URL, schema });
  await migrate(store);
  await store.close();
  sim = await startTestSimulator({ keyPrefix: 'acme' });
  writeFileSync(join(dir, 'a.key'), GOOD_A);
  writeFileSync(join(dir, 'c-good.key'), GOOD_C);
  writeFileSync(join(dir, 'c-rejected.key'), REJECTED);
  writeFileSync(join(dir, 'empty.key'), '');
});
afterAll(async () => {
  await sim.close();
  await dropSchema(schema);
  await deletePrefix(prefix);
  rmSync(dir, { recursive: true, force: true });
});

/** A sources file of three: alpha by key file, beta by variable, gamma by `gammaKey`'s file. */
function sourcesFile(gammaKey: string): string {
  const path = join(dir, `sources-${gammaKey}.json`);
  writeFileSync(
    path,
    JSON.stringify({
      sources: [
        { source: 'alpha', api_key_file: join(dir, 'a.key') },
        { source: 'beta', api_key_env: 'BETA_KEY' },
        { source: 'gamma', api_key_file: join(dir, gammaKey) },
      ],
    }),
  );
  return path;
}

/** The test environment with the sources file and without FEED_API_KEY: every key is in the file. */
function env(file: string): Record<string, string> {
  const { FEED_API_KEY: _unused, ...rest } = testEnv({ schema, prefix, baseUrl: sim.baseUrl });
  return { PATH: process.env.PATH ?? '', ...rest, FEED_SOURCES_FILE: file, BETA_KEY: GOOD_B };
}

/** The status of each line of the report, by check name. */
function lines(stdout: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of stdout.matchAll(/^(ok|warn|fail|skip) +(\S+(?: \S+)?) {2,}/gm)) out[m[2]!.trim()] = m[1]!;
  return out;
}

describe('feedsync doctor with FEED_SOURCES_FILE', () => {
  it('checks every source of the file with its own key: one rejected key fails its line, exit 1', async () => {
    const run = await runCli(['doctor', '--timeout-ms', '5000'], env(sourcesFile('c-rejected.key')));
    expect(run.code).toBe(1);
    expect(lines(run.stdout)).toMatchObject({
      'feed alpha': 'ok',
      'feed beta': 'ok',
      'feed gamma': 'fail',
      'cursor alpha': 'ok',
      'cursor beta': 'ok',
      'cursor gamma': 'ok',
    });
    expect(run.stdout).toMatch(/^fail {2}feed gamma +the service rejected the key \(HTTP 401\)$/m);
    expect(run.stdout).toContain('the key of source "gamma"');
    expect(run.stdout).not.toMatch(/^\S+ +feed {2,}/m);
    expect(run.stdout).not.toContain('set FEED_API_KEY');
    expect(run.stdout).not.toContain('all is well');
    for (const key of [GOOD_A, GOOD_B, REJECTED]) expect(run.stdout).not.toContain(key);
  });

  it('says all is well with every key in the file and no FEED_API_KEY', async () => {
    const run = await runCli(['doctor'], env(sourcesFile('c-good.key')));
    expect(run.stdout).not.toContain('set FEED_API_KEY');
    expect(lines(run.stdout)).toMatchObject({ 'feed alpha': 'ok', 'feed beta': 'ok', 'feed gamma': 'ok' });
    expect(run.stdout).toContain('all is well');
    expect(run.code).toBe(0);
  });

  it('reports a missing or empty key file as a failing line of its source, not a crash', async () => {
    for (const gammaKey of ['missing.key', 'empty.key']) {
      const run = await runCli(['doctor'], env(sourcesFile(gammaKey)));
      expect(run.code).toBe(1);
      expect(lines(run.stdout)).toMatchObject({ config: 'ok', 'feed alpha': 'ok', 'feed gamma': 'fail' });
      expect(run.stdout).toMatch(/^fail {2}feed gamma +source "gamma": api_key_file/m);
      expect(run.stdout).not.toContain('set FEED_API_KEY');
    }
  });

  it('--source checks that source alone; a name not in the file is a usage error (exit 2)', async () => {
    const file = sourcesFile('c-rejected.key');
    const one = await runCli(['doctor', '--source', 'gamma'], env(file));
    expect(one.code).toBe(1);
    const found = lines(one.stdout);
    expect(found).toMatchObject({ 'feed gamma': 'fail', 'cursor gamma': 'ok' });
    expect(Object.keys(found).filter((n) => n.startsWith('feed') || n.startsWith('cursor'))).toEqual([
      'cursor gamma',
      'feed gamma',
    ]);
    const good = await runCli(['doctor', '--source', 'alpha'], env(file));
    expect(good.code).toBe(0);
    const unknown = await runCli(['doctor', '--source', 'nope'], env(file));
    expect(unknown.code).toBe(2);
    expect(unknown.stdout).toBe('');
    expect(unknown.stderr.trim().split('\n')).toEqual([
      'feedsync: source "nope" is not in FEED_SOURCES_FILE (alpha, beta, gamma); give --source one of them',
    ]);
  });
});

describe('mapBounded', () => {
  it('runs at most `limit` at once, in order, and gives what is left at the deadline its late value', async () => {
    let running = 0;
    let most = 0;
    const items = Array.from({ length: 50 }, (_, i) => i);
    const out = await mapBounded(
      items,
      4,
      Number.POSITIVE_INFINITY,
      async (i) => {
        running += 1;
        most = Math.max(most, running);
        await new Promise((r) => setImmediate(r));
        running -= 1;
        return i * 2;
      },
      () => -1,
    );
    expect(most).toBe(4);
    expect(out).toEqual(items.map((i) => i * 2));
    const late = await mapBounded(
      items,
      4,
      0,
      async () => 1,
      () => -1,
    );
    expect(late).toEqual(items.map(() => -1));
  });
});
