import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/**
 * CPU time of the processes a measurement involves, read from /proc (Linux): the
 * worker, its own Postgres backends (matched by the client ports of its sockets),
 * Redis and the simulator. CPU time per event barely depends on how busy the
 * machine is, which wall time does: it says where the work goes.
 */

const TICK_MS = (() => {
  try {
    return 1000 / Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
  } catch {
    return 10;
  }
})();

/** User plus system CPU time of a process, in ms; null once it is gone. */
export function cpuMs(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
  } catch {
    return null;
  }
}

/** The local TCP ports of a process's sockets. */
export function localPorts(pid) {
  const inodes = new Set();
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m) inodes.add(m[1]);
      } catch {
        // The descriptor closed meanwhile.
      }
    }
  } catch {
    return [];
  }
  const ports = [];
  for (const table of ['tcp', 'tcp6']) {
    let text = '';
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length > 9 && inodes.has(cols[9])) ports.push(Number.parseInt(cols[1].split(':')[1], 16));
    }
  }
  return ports;
}

/** The pids of the Postgres backends serving a process's connections (`pg` is a connected client). */
export async function backendsOf(pg, pid) {
  const ports = localPorts(pid);
  if (ports.length === 0) return [];
  const { rows } = await pg.query(
    'SELECT pid FROM pg_stat_activity WHERE client_port = ANY($1::int[]) AND pid <> pg_backend_pid()',
    [ports],
  );
  return rows.map((r) => r.pid);
}

/**
 * Follows a process's Postgres backends while it runs: call `sample()` often (they
 * come and go with the pool), `totalMs()` at the end for their CPU time.
 */
export function backendMeter(pg, pid) {
  const last = new Map();
  let busy = false;
  return {
    async sample() {
      for (const b of last.keys()) {
        const ms = cpuMs(b);
        if (ms !== null) last.set(b, ms);
      }
      if (busy) return;
      busy = true;
      try {
        for (const b of await backendsOf(pg, pid)) if (!last.has(b)) last.set(b, cpuMs(b) ?? 0);
      } catch {
        // The process exited meanwhile.
      } finally {
        busy = false;
      }
    },
    /** CPU time of those backends: each started for the measured process, so all of it counts. */
    totalMs: () => [...last.values()].reduce((a, b) => a + b, 0),
  };
}
