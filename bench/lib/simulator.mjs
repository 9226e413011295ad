import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';

/**
 * Starts the simulator in a child process and drives it through its loopback
 * control API (`/_sim`). `options` are SimulatorOptions of a bench's own (`rateLimit`).
 */
export async function startSimChild(options = {}) {
  const args = Object.keys(options).length > 0 ? [JSON.stringify(options)] : [];
  const child = spawn(process.execPath, [new URL('./sim-child.mjs', import.meta.url).pathname, ...args], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout });
  const [first] = await Promise.race([
    once(lines, 'line'),
    once(child, 'exit').then(() => {
      throw new Error('the simulator exited before it listened');
    }),
  ]);
  const { origin, baseUrl } = JSON.parse(first);
  const control = async (path, body) => {
    const res = await fetch(`${origin}/_sim/${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`/_sim/${path}: HTTP ${res.status} ${await res.text()}`);
    return res.json();
  };
  return {
    origin,
    baseUrl,
    pid: child.pid,
    /**
     * A synthetic backlog of `count` events, and nothing else, in the feed (of the account of
     * `key`; default the bench's): `replace` starts the feed over, where the default adds to it.
     */
    setBacklog: (count, key) =>
      control('backlog', key ? { count, key, replace: true } : { count, replace: true }),
    setLatency: (latencyMs) => control('faults', { latencyMs }),
    async stop() {
      if (child.exitCode !== null) return;
      child.stdin.end();
      await once(child, 'exit');
    },
  };
}
