import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { POSTGRES_QUEUE_FAULT_FILES } from '../../../vitest.faults.config.js';
import { TEST_DATABASE_URL } from '../../support/postgres.js';
import { TEST_QUEUE_BACKEND } from '../../support/queues.js';
import { TEST_REDIS_URL } from '../../support/redis.js';
import { ensureTestDatabase } from '../../support/test-database.js';
import { type Machine, renderPage } from './reliability-page.js';
import type { FaultRecord } from './results.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const FAULTS = join(ROOT, 'test', 'faults');
/** The page a whole run writes, and the files it runs: all, or with the queues in Postgres those listed. */
const [PAGE_NAME, FILES] =
  TEST_QUEUE_BACKEND === 'postgres'
    ? ['RELIABILITY-POSTGRES.md', POSTGRES_QUEUE_FAULT_FILES.map((f) => f.replace('test/faults/', ''))]
    : ['RELIABILITY.md', readdirSync(FAULTS).filter((f) => f.endsWith('.test.ts'))];
const PAGE = join(ROOT, 'docs', PAGE_NAME);

/**
 * The item numbers the run holds, read from the `item: N` of each of its test files, so
 * that a new file adds its items without a count to keep in step. A number used
 * twice is reported by its files.
 */
function expectedItems(): Map<number, string[]> {
  const items = new Map<number, string[]>();
  for (const file of FILES) {
    const text = readFileSync(join(FAULTS, file), 'utf8');
    // `item: N,` on a line of its own, or first in an object literal on one line (a table of variants).
    for (const m of text.matchAll(/^\s*(?:\{ )?item: (\d+),/gm)) {
      const n = Number(m[1]);
      items.set(n, [...(items.get(n) ?? []), file]);
    }
  }
  return items;
}

/**
 * Before the suite: a directory for the measurements, and a build of dist/ when
 * it is older than src/ (the children run the built command), and the database the
 * tests use. After: the page.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = mkdtempSync(join(tmpdir(), 'feedsync-faults-'));
  project.provide('faultResultsDir', dir);
  await ensureTestDatabase();
  if (newest(join(ROOT, 'src')) > mtime(join(ROOT, 'dist', 'bin', 'feedsync.js'))) {
    await promisify(execFile)('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: ROOT });
  }
  return async () => {
    try {
      const records = readdirSync(dir)
        .filter((f) => f.endsWith('.json'))
        .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as FaultRecord);
      for (const r of records.sort((a, b) => a.item - b.item)) {
        process.stdout.write(
          `fault ${r.item} ${r.passed ? 'pass' : 'FAIL'}: ${r.injected} ${r.injectedWhat}, ${r.checked} checked, ` +
            `${r.lost} lost, ${r.duplicated} duplicated; ${r.figures.map(([k, v]) => `${k}: ${v}`).join('; ')}\n`,
        );
      }
      const expected = expectedItems();
      const twice = [...expected].filter(([, files]) => files.length > 1);
      if (twice.length > 0) {
        const list = twice.map(([n, files]) => `${n} (${files.join(', ')})`).join('; ');
        process.stdout.write(
          `fault suite: item numbers used twice: ${list}; docs/${PAGE_NAME} left as it was\n`,
        );
        return;
      }
      // A partial run (one file while developing) measures too little for the page: it is left alone.
      const missing = [...expected.keys()]
        .filter((n) => !records.some((r) => r.item === n))
        .sort((a, b) => a - b);
      if (missing.length > 0) {
        process.stdout.write(
          `fault suite: items ${missing.join(', ')} did not run; docs/${PAGE_NAME} left as it was\n`,
        );
        return;
      }
      writeFileSync(PAGE, renderPage(records, await machine(), TEST_QUEUE_BACKEND));
      process.stdout.write(`fault suite: wrote ${PAGE}\n`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
}

async function machine(): Promise<Machine> {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  const version =
    (await client.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0]?.v ?? '?';
  await client.end();
  const redis = new Redis(TEST_REDIS_URL);
  const info = await redis.info('server');
  redis.disconnect();
  return {
    date: new Date().toISOString().slice(0, 10),
    cpus: availableParallelism(),
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown CPU',
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.versions.node,
    postgres: `PostgreSQL ${version.split(' ')[0]}`,
    redis: /redis_version:(\S+)/.exec(info)?.[1] ?? '?',
    bullmq: (
      JSON.parse(readFileSync(join(ROOT, 'node_modules', 'bullmq', 'package.json'), 'utf8')) as {
        version: string;
      }
    ).version,
  };
}

function mtime(path: string): number {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return 0;
  }
}

/** The newest modification time of any file under `dir`. */
function newest(dir: string): number {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) latest = Math.max(latest, mtime(join(entry.parentPath, entry.name)));
  }
  return latest;
}
