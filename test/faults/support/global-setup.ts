import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
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
import { type RunFacts, readData, serialize, withRun } from './reliability-data.js';
import { renderPage } from './reliability-page.js';
import type { FaultRecord } from './results.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const FAULTS = join(ROOT, 'test', 'faults');
const PAGE = join(ROOT, 'docs', 'RELIABILITY.md');
/** Both backends' last complete runs, which the page is drawn from. */
const DATA = join(ROOT, 'docs', 'reliability', 'results.json');
/** The files a whole run holds: all, or with the queues in Postgres those listed. */
const FILES =
  TEST_QUEUE_BACKEND === 'postgres'
    ? POSTGRES_QUEUE_FAULT_FILES.map((f) => f.replace('test/faults/', ''))
    : readdirSync(FAULTS).filter((f) => f.endsWith('.test.ts'));

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
 * tests use. After: this backend's results in docs/reliability/results.json, and the
 * page drawn from both backends' results.
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
          `fault suite: item numbers used twice: ${list}; docs/RELIABILITY.md and its results left as they were\n`,
        );
        return;
      }
      // A partial run (one file while developing) measures too little for the page: it is left alone.
      const missing = [...expected.keys()]
        .filter((n) => !records.some((r) => r.item === n))
        .sort((a, b) => a - b);
      if (missing.length > 0) {
        process.stdout.write(
          `fault suite: items ${missing.join(', ')} did not run; docs/RELIABILITY.md and its results left as they were\n`,
        );
        return;
      }
      const data = withRun(readData(DATA), TEST_QUEUE_BACKEND, { facts: await runFacts(), items: records });
      mkdirSync(dirname(DATA), { recursive: true });
      writeFileSync(DATA, serialize(data));
      writeFileSync(PAGE, renderPage(data));
      process.stdout.write(`fault suite: wrote ${TEST_QUEUE_BACKEND}'s results to ${DATA} and ${PAGE}\n`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
}

/** The day, machine and versions of this run, as the page prints them. */
async function runFacts(): Promise<RunFacts> {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  const version =
    (await client.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0]?.v ?? '?';
  await client.end();
  // With the queues in Redis the run drives Redis; with them in Postgres, BullMQ's Postgres backend.
  let queues: string;
  if (TEST_QUEUE_BACKEND === 'postgres') {
    const bullmq = JSON.parse(readFileSync(join(ROOT, 'node_modules', 'bullmq', 'package.json'), 'utf8')) as {
      version: string;
    };
    queues = `BullMQ ${bullmq.version}`;
  } else {
    const redis = new Redis(TEST_REDIS_URL);
    const info = await redis.info('server');
    redis.disconnect();
    queues = `Redis ${/redis_version:(\S+)/.exec(info)?.[1] ?? '?'}`;
  }
  const memoryGiB = Math.round((totalmem() / 2 ** 30) * 10) / 10;
  return {
    date: new Date().toISOString().slice(0, 10),
    machine: `${availableParallelism()} CPUs (${cpus()[0]?.model.trim() ?? 'unknown CPU'}), ${memoryGiB} GiB memory`,
    software: `Node ${process.versions.node}, PostgreSQL ${version.split(' ')[0]}, ${queues}`,
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
