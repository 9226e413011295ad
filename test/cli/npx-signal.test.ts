import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { testEnv } from '../support/config.js';
import { freePort, portOpen, waitFor } from '../support/processes.js';
import { useSimulator } from '../support/simulator.js';
import { useSandboxes } from '../sync/harness.js';

/**
 * The README's form, `npx feedsync sync --watch &`, stopped by the pid a script holds
 * (`kill -TERM $!`, npx's): npx ends without passing the signal on, and the worker it
 * started follows it (src/cli/shutdown.ts), giving the metrics port back.
 */
const root = fileURLToPath(new URL('../../', import.meta.url));
const sim = useSimulator({ backlog: 50 });
const sandbox = useSandboxes();
const started: number[] = [];
afterAll(() => {
  for (const pid of started) if (alive(pid)) process.kill(pid, 'SIGKILL');
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Every process below `pid` (Linux: /proc/<pid>/task/<pid>/children). */
function descendants(pid: number): number[] {
  let text = '';
  try {
    text = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8');
  } catch {
    return [];
  }
  const children = text.split(' ').filter(Boolean).map(Number);
  return children.flatMap((c) => [c, ...descendants(c)]);
}

/** Runs `npx feedsync <args> &` as a script would; resolves with $!, npx's pid, and the stderr so far. */
async function npxInBackground(
  args: string,
  env: NodeJS.ProcessEnv,
): Promise<{ pid: number; stderr: () => string }> {
  const shell = spawn('sh', ['-c', `npx feedsync ${args} & echo $!; wait`], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  shell.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const pid = await new Promise<number>((resolve) =>
    shell.stdout.once('data', (chunk: Buffer) => resolve(Number(chunk.toString().split('\n')[0]))),
  );
  shell.stdout.resume();
  started.push(pid);
  return { pid, stderr: () => stderr };
}

/** Sends SIGTERM to npx's pid and waits for what it started to exit and the port to close. */
async function stopByNpxPid(npxPid: number, port: number, stderr: () => string): Promise<void> {
  await waitFor(() => portOpen(port), { timeoutMs: 30_000, what: 'the port to be served' });
  const below = descendants(npxPid);
  expect(below.length, stderr()).toBeGreaterThan(0);
  started.push(...below);
  process.kill(npxPid, 'SIGTERM');
  await waitFor(() => below.every((pid) => !alive(pid)), {
    timeoutMs: 20_000,
    what: 'what npx started to exit',
  });
  expect(await portOpen(port), stderr()).toBe(false);
}

describe.skipIf(process.platform !== 'linux')('npx feedsync … &, then kill -TERM $!', () => {
  it('stops the worker and releases the metrics port', async () => {
    const box = await sandbox('npx_signal');
    const port = await freePort();
    const env = {
      ...process.env,
      ...testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl }),
      METRICS_PORT: String(port),
      METRICS_HOST: '127.0.0.1',
    };
    // What a script runs: `npx feedsync sync --watch &`, and $! is npx's pid.
    const npx = await npxInBackground('sync --watch', env);
    await stopByNpxPid(npx.pid, port, npx.stderr);
  }, 60_000);

  it('stops the simulator and releases its port', async () => {
    const port = await freePort();
    const npx = await npxInBackground(`simulator --port ${port}`, process.env);
    await stopByNpxPid(npx.pid, port, npx.stderr);
  }, 60_000);
});
