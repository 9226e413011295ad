import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * A memory cgroup with a limit, as a Kubernetes pod's container runs in: Node sizes V8's
 * heap from it (process.constrainedMemory()), and the kernel kills what goes past it.
 * A process on this machine without one gets a heap sized from the whole machine's memory
 * and lets its old generation grow accordingly, which no pod with a limit does.
 * Needs root and a writable cgroup hierarchy (v1 memory controller or v2); null without.
 */
export function createMemoryCgroup(limitBytes, name = `feedsync-${process.pid}-${Date.now()}`) {
  const v1 = '/sys/fs/cgroup/memory';
  const v2 = '/sys/fs/cgroup';
  let files;
  if (existsSync(`${v1}/cgroup.procs`)) {
    files = { dir: `${v1}/${name}`, limit: 'memory.limit_in_bytes', peak: 'memory.max_usage_in_bytes' };
  } else if (readOr(`${v2}/cgroup.subtree_control`, '').split(/\s+/).includes('memory')) {
    files = { dir: `${v2}/${name}`, limit: 'memory.max', peak: 'memory.peak' };
  } else return null;
  try {
    mkdirSync(files.dir);
    writeFileSync(`${files.dir}/${files.limit}`, String(limitBytes));
    // No swap: past the limit the process is killed, as in a pod, instead of slowing down.
    if (existsSync(`${files.dir}/memory.memsw.limit_in_bytes`))
      writeFileSync(`${files.dir}/memory.memsw.limit_in_bytes`, String(limitBytes));
    if (existsSync(`${files.dir}/memory.swap.max`)) writeFileSync(`${files.dir}/memory.swap.max`, '0');
  } catch {
    return null;
  }
  return {
    limitBytes,
    /** The command and arguments that run `cmd args…` inside the cgroup: a shell that joins it, then execs (same pid). */
    wrap(cmd, args) {
      return ['/bin/sh', ['-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', files.dir, cmd, ...args]];
    },
    /** The cgroup's peak charge in bytes (resident memory and page cache), as the kernel counts it against the limit. */
    peakBytes: () => Number(readOr(`${files.dir}/${files.peak}`, '0')),
    /** How many processes the kernel killed for the limit (0 where the kernel does not count them). */
    oomKills() {
      const events = readOr(`${files.dir}/memory.oom_control`, '') + readOr(`${files.dir}/memory.events`, '');
      return Number(/^oom_kill (\d+)/m.exec(events)?.[1] ?? 0);
    },
    /** Removes the cgroup once its processes are gone (a second or so after they exit). */
    async dispose() {
      for (let i = 0; i < 50; i++) {
        try {
          rmdirSync(files.dir);
          return;
        } catch {
          await sleep(100);
        }
      }
    },
  };
}

function readOr(path, fallback) {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return fallback;
  }
}
