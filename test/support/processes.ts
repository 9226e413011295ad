import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';

/** The built command (`npm run build` writes it; `npm test` builds first). */
export const CLI = fileURLToPath(new URL('../../dist/bin/feedsync.js', import.meta.url));
/** The crash-point worker of the crash tests (runs dist/ too). */
export const SYNC_WORKER = fileURLToPath(new URL('../children/sync-worker.mjs', import.meta.url));

/** How a child process ended, with everything it printed. */
export interface ChildResult {
  /** Exit code, or null when a signal ended it. */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface RunningChild {
  readonly pid: number;
  readonly process: ChildProcess;
  /** What it printed so far. */
  stdout(): string;
  stderr(): string;
  /** Settles when the process has exited and its output is closed. */
  readonly exited: Promise<ChildResult>;
  /** Waits at most `timeoutMs` for the exit; after that kills it with SIGKILL and throws. */
  waitExit(timeoutMs: number): Promise<ChildResult>;
  /** Sends a signal to this process only (by its pid). */
  signal(name: NodeJS.Signals): void;
}

/** Children still running, so that an afterAll can end them after a failed test. */
const running = new Set<RunningChild>();

/**
 * Starts `node <args>` with exactly `env` (nothing inherited, so a test states all
 * the configuration its child sees). Output is collected in memory.
 */
export function spawnNode(args: readonly string[], env: Record<string, string>): RunningChild {
  const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    err += chunk.toString();
  });
  const exited = new Promise<ChildResult>((resolve, reject) => {
    child.once('error', reject);
    // 'close' comes after 'exit' once stdout and stderr are drained.
    child.once('close', (code, signal) => resolve({ code, signal, stdout: out, stderr: err }));
  });
  const handle: RunningChild = {
    pid: child.pid ?? -1,
    process: child,
    stdout: () => out,
    stderr: () => err,
    exited,
    async waitExit(timeoutMs) {
      const timer = sleep(timeoutMs, 'timeout' as const, { ref: false });
      const first = await Promise.race([exited, timer]);
      if (first !== 'timeout') return first;
      handle.signal('SIGKILL');
      await exited;
      throw new Error(
        `node ${args.join(' ')} did not exit within ${timeoutMs} ms\nstdout:\n${out}\nstderr:\n${err}`,
      );
    },
    signal(name) {
      if (child.exitCode === null && child.signalCode === null) child.kill(name);
    },
  };
  running.add(handle);
  void exited.finally(() => running.delete(handle)).catch(() => {});
  return handle;
}

/** Runs `node <args>` to the end, at most `timeoutMs`. */
export function runNode(
  args: readonly string[],
  env: Record<string, string>,
  timeoutMs = 20_000,
): Promise<ChildResult> {
  return spawnNode(args, env).waitExit(timeoutMs);
}

/** Runs `node dist/bin/feedsync.js <args>` to the end. */
export function runCli(
  args: readonly string[],
  env: Record<string, string>,
  timeoutMs = 20_000,
): Promise<ChildResult> {
  return runNode([CLI, ...args], env, timeoutMs);
}

/** SIGKILLs every child this file started that is still running; for afterAll. */
export async function killChildren(): Promise<void> {
  const left = [...running];
  for (const child of left) child.signal('SIGKILL');
  await Promise.allSettled(left.map((c) => c.exited));
}

export interface WaitOptions {
  /** Give up after this long. Default 10 s. */
  timeoutMs?: number;
  /** Pause between probes. Default 25 ms. */
  intervalMs?: number;
  /** Named in the error when the wait times out. */
  what?: string;
}

/**
 * Polls `probe` until it returns something other than undefined, null or false,
 * and returns that; throws after `timeoutMs`. For waiting on other processes,
 * whose clock a test cannot drive.
 */
export async function waitFor<T>(
  probe: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  opts: WaitOptions = {},
): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const intervalMs = opts.intervalMs ?? 25;
  const deadline = performance.now() + timeoutMs;
  for (let i = 0; ; i++) {
    const value = await probe();
    if (value !== undefined && value !== null && value !== false) return value as T;
    if (performance.now() >= deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${opts.what ?? 'a condition'}`);
    }
    await sleep(Math.min(intervalMs * (i < 10 ? 1 : 4), 200));
  }
}

/** A loopback TCP port that was free a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Whether something accepts connections at 127.0.0.1:`port` now. */
export function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** A private redis-server child on its own port. */
export interface RedisServer {
  readonly port: number;
  /** `redis://127.0.0.1:<port>` */
  readonly url: string;
  /** Whether the server process runs now. */
  readonly up: boolean;
  /** Starts it again on the same port (after `stop`). */
  start(): Promise<void>;
  /** Sends `signal` (default SIGTERM: a clean shutdown), then waits for the exit (SIGKILL after 5 s). */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Stops it and removes its data directory. */
  dispose(): Promise<void>;
  /** Its data directory (removed by `dispose`). */
  readonly dir: string;
  /**
   * A client for what acts on the whole server (FLUSHALL, CONFIG SET): only ever this
   * server, which the test started on a port of its own; the caller disconnects it.
   */
  admin(): Redis;
}

export interface RedisServerOptions {
  /** Default: a free port. */
  port?: number;
  /**
   * Keep the data across a stop and start through an append-only file fsynced on
   * every write (as a production Redis under BullMQ is set up). Default false:
   * `--appendonly no`, so a restart starts empty.
   */
  persist?: boolean;
  /** More arguments: `--cluster-enabled yes`, `--replicaof …`. */
  args?: readonly string[];
  /** A config file to start from (a Sentinel's, which it rewrites), placed first. */
  configFile?: string;
}

/** Starts `redis-server` as a child process on loopback and waits until it answers PING. */
export async function startRedisServer(opts: RedisServerOptions = {}): Promise<RedisServer> {
  const port = opts.port ?? (await freePort());
  // The shared Redis of this machine must never be flushed or reconfigured by a test:
  // refused before anything is made, so nothing is left to clean up.
  if (port === SHARED_REDIS_PORT) throw new Error(`startRedisServer: port ${port} is the shared Redis's`);
  const dir = mkdtempSync(join(tmpdir(), 'feedsync-redis-'));
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--daemonize', 'no'];
  args.push('--dir', dir, '--appendonly', opts.persist ? 'yes' : 'no');
  if (opts.persist) args.push('--appendfsync', 'always');
  args.push(...(opts.args ?? []));
  if (opts.configFile) args.unshift(opts.configFile);
  let child: ChildProcess | null = null;
  let exited: Promise<void> = Promise.resolve();

  const start = async (): Promise<void> => {
    if (child) return;
    const proc = spawn('redis-server', args, { stdio: 'ignore' });
    child = proc;
    exited = new Promise<void>((resolve) => proc.once('close', () => resolve()));
    void exited.then(() => {
      if (child === proc) child = null;
    });
    await waitFor(() => ping(port), { timeoutMs: 10_000, what: `redis-server on port ${port}` });
  };
  const stop = async (signal: NodeJS.Signals = 'SIGTERM'): Promise<void> => {
    const proc = child;
    if (!proc) return;
    proc.kill(signal);
    const killed = setTimeout(() => proc.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(killed);
    child = null;
  };

  await start();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    dir,
    get up() {
      return child !== null;
    },
    start,
    stop,
    async dispose() {
      await stop('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
    admin() {
      return new Redis({ port, host: '127.0.0.1' });
    },
  };
}

/** The machine's own Redis, shared with other work. */
const SHARED_REDIS_PORT = 6379;

async function ping(port: number): Promise<boolean> {
  const redis = new Redis({
    port,
    host: '127.0.0.1',
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  });
  redis.on('error', () => {});
  try {
    await redis.connect();
    return (await redis.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}
