import { type ChildProcess, spawn } from 'node:child_process';
import { chownSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RunAs } from './postgres-binaries.js';

/** initdb, and then the server's start: well under a second on a laptop, a few on a loaded machine. */
const STEP_DEADLINE_MS = 60_000;
/** Each step of a stop (a smart shutdown, a fast one, a kill) of a server holding a few hundred rows. */
const STOP_DEADLINE_MS = 5_000;
/** What is kept of a program's own output, for the message when it fails. */
const LOG_TAIL_CHARS = 2_000;
/** What the server prints once it takes connections (its messages in English: lc_messages C). */
const READY = 'database system is ready to accept connections';

/** Where a Postgres of its own lives: its binaries, a folder of its own and its data below it. */
interface Layout {
  /** The `bin/` folder of initdb and postgres. */
  readonly bin: string;
  /** A folder the user may write in: the programs' working folder. */
  readonly dir: string;
  /** The data folder, made by initdb. */
  readonly data: string;
  /** Null: as this process's own user. */
  readonly user: RunAs | null;
}

/** initdb: a `postgres` superuser with `password` (scram-sha-256), UTF-8, the C locale, no fsync. */
export async function runInitdb(at: Layout & { password: string }): Promise<void> {
  const pwfile = join(at.dir, 'pwfile');
  writeFileSync(pwfile, `${at.password}\n`, { mode: 0o600 });
  if (at.user) chownSync(pwfile, at.user.uid, at.user.gid);
  try {
    const child = run(at, 'initdb', [
      `--pgdata=${at.data}`,
      '--auth=scram-sha-256',
      '--username=postgres',
      `--pwfile=${pwfile}`,
      '--encoding=UTF8',
      '--locale=C',
      '--no-sync',
    ]);
    const code = await ended(child.process, STEP_DEADLINE_MS);
    if (code !== 0) throw new Error(`initdb ${code}; its last words: ${child.tail()}`);
  } finally {
    rmSync(pwfile, { force: true });
  }
}

/** Starts the server with `flags` (port, addresses); resolves once it takes connections. */
export async function startPostgres(at: Layout & { flags: readonly string[] }): Promise<void> {
  // A process group of its own: a Ctrl-C or a closed terminal reaches the demo, which
  // stops the server in order, and a kill reaches its every process.
  const child = run(at, 'postgres', ['-D', at.data, '-c', 'fsync=off', ...at.flags], { detached: true });
  const ready = new Promise<void>((resolve, reject) => {
    child.process.stderr?.on('data', () => {
      if (child.tail().includes(READY)) resolve();
    });
    ended(child.process, Number.POSITIVE_INFINITY).then(
      (code) => reject(new Error(`postgres ${code}; its last words: ${child.tail()}`)),
      reject,
    );
  });
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`no answer within ${STEP_DEADLINE_MS / 1000} s`)),
      STEP_DEADLINE_MS,
    );
  });
  await Promise.race([ready, deadline]).finally(() => clearTimeout(timer));
}

/** A program of `bin/`, run as the layout's user from its folder (that user may not enter ours). */
function run(
  at: Layout,
  program: string,
  args: readonly string[],
  opts: { detached?: boolean } = {},
): { process: ChildProcess; tail(): string } {
  const child = spawn(join(at.bin, program), args, {
    cwd: at.dir,
    detached: opts.detached === true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LC_ALL: 'C' },
    ...(at.user ? { uid: at.user.uid, gid: at.user.gid } : {}),
  });
  let log = '';
  const keep = (chunk: Buffer) => {
    log = `${log}${chunk.toString('utf8')}`.slice(-LOG_TAIL_CHARS);
  };
  // Read for as long as it runs: a full pipe would stop the server.
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return { process: child, tail: () => log.trim().split('\n').slice(-3).join(' / ') };
}

/** How the child ended ("exited 1", "killed by SIGKILL", or the error of a spawn that failed), within `ms`. */
function ended(child: ChildProcess, ms: number): Promise<string | 0> {
  return new Promise((resolve, reject) => {
    const timer = Number.isFinite(ms)
      ? setTimeout(() => {
          child.kill('SIGKILL');
          reject(new Error(`no answer within ${ms / 1000} s`));
        }, ms)
      : undefined;
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve(code === 0 ? 0 : signal ? `killed by ${signal}` : `exited ${code}`);
    });
  });
}

/**
 * Stops the server whose data is `data` (its postmaster.pid says which): each step of
 * `steps` (smart SIGTERM, fast SIGINT, SIGKILL) that does not end it within
 * STOP_DEADLINE_MS is followed by the next. A pid that now belongs to another program
 * is left alone. Returns whether no server of `data` runs.
 */
export async function stopServer(data: string, steps: readonly NodeJS.Signals[]): Promise<boolean> {
  const pid = postmasterPid(data);
  if (pid === null || !serves(pid, data)) return true;
  for (const step of steps) {
    if (!alive(pid)) return true;
    signal(pid, step);
    if (step !== 'SIGKILL' && (await gone(pid, STOP_DEADLINE_MS))) return true;
  }
  return gone(pid, STOP_DEADLINE_MS);
}

function postmasterPid(data: string): number | null {
  try {
    const pid = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/** Whether `pid` is a server of `data`, where /proc tells (a reused pid is not); elsewhere, whether it runs. */
function serves(pid: number, data: string): boolean {
  if (!existsSync('/proc/self/cmdline')) return alive(pid);
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(data);
  } catch {
    return false;
  }
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it runs, as another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A kill goes to the server's process group (its backends too); the other steps to the server, which stops them. */
function signal(pid: number, name: NodeJS.Signals): void {
  for (const target of name === 'SIGKILL' ? [-pid, pid] : [pid]) {
    try {
      process.kill(target, name);
      return;
    } catch {
      // Not a group's leader, or it ended meanwhile.
    }
  }
}

/** Whether `pid` ended within `ms`; its parent (this process or init) reaps it, so the pid frees. */
async function gone(pid: number, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (alive(pid)) {
    if (Date.now() >= until) return false;
    await sleep(50);
  }
  return true;
}
