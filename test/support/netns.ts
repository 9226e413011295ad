import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';

/**
 * A network namespace of its own with only loopback up: a machine where nothing
 * listens. Made with `ip netns` (iproute2; root). Programs run inside through `exec`.
 */
export interface Netns {
  readonly name: string;
  /** `ip netns exec <name> <command…>`: the command's argv inside the namespace (ip execs it, same pid). */
  argv(command: string, args: readonly string[]): [string, string[]];
  /** Removes the namespace. */
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
  return {
    name,
    argv: (command, args) => ['ip', ['netns', 'exec', name, command, ...args]],
    async dispose() {
      ip(['netns', 'del', name]);
    },
  };
}
