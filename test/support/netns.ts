import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { waitFor } from './processes.js';

/**
 * A network namespace of its own with only loopback up: a machine where nothing
 * listens. Made with `ip netns` (iproute2; root). Programs run inside through `exec`.
 */
export interface Netns {
  readonly name: string;
  /** `ip netns exec <name> <command…>`: the command's argv inside the namespace (ip execs it, same pid). */
  argv(command: string, args: readonly string[]): [string, string[]];
  /** Starts a redis-server at 127.0.0.1:6379 inside it, and waits until it answers. */
  startRedis(): Promise<void>;
  /** Ends what it started and removes the namespace. */
  dispose(): Promise<void>;
}

function ip(args: readonly string[]): void {
  const run = spawnSync('ip', args, { encoding: 'utf8', timeout: 10_000 });
  if (run.status !== 0) throw new Error(`ip ${args.join(' ')}: ${run.stderr || run.error?.message}`);
}

export function createNetns(label: string): Netns {
  const name = `feedsync-${label}-${randomBytes(3).toString('hex')}`;
  ip(['netns', 'add', name]);
  ip(['netns', 'exec', name, 'ip', 'link', 'set', 'lo', 'up']);
  const children: ChildProcess[] = [];
  const argv = (command: string, args: readonly string[]): [string, string[]] => [
    'ip',
    ['netns', 'exec', name, command, ...args],
  ];
  return {
    name,
    argv,
    async startRedis() {
      const [cmd, args] = argv('redis-server', [
        '--port',
        '6379',
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
      ]);
      children.push(spawn(cmd, args, { stdio: 'ignore' }));
      await waitFor(
        () =>
          spawnSync(...argv('redis-cli', ['ping']), { encoding: 'utf8', timeout: 5_000 }).stdout?.includes(
            'PONG',
          ),
        { what: `redis-server in ${name}` },
      );
    },
    async dispose() {
      await Promise.all(
        children.map(
          (child) =>
            new Promise<void>((resolve) => {
              if (child.exitCode !== null || child.signalCode !== null) return resolve();
              child.once('close', () => resolve());
              child.kill('SIGKILL');
            }),
        ),
      );
      ip(['netns', 'del', name]);
    },
  };
}
