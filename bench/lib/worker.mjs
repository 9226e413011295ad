import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { backendMeter, cpuMs } from './cpu.mjs';
import { API_KEY, CLI, DATABASE_URL, IMAGE_NODE_FLAGS, REDIS_URL } from './env.mjs';

/** The environment of a real `feedsync sync --once` run against the simulator. */
export function workerEnv({ schema, prefix, baseUrl }) {
  return {
    PATH: process.env.PATH,
    DATABASE_URL,
    DATABASE_SCHEMA: schema,
    REDIS_URL,
    QUEUE_PREFIX: prefix,
    FEED_BASE_URL: baseUrl,
    FEED_API_KEY: API_KEY,
    LOG_LEVEL: 'info',
  };
}

/** VmRSS and VmHWM of a live process, in kB; null once it is gone. */
function memoryOf(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (name) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
    return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
  } catch {
    return null;
  }
}

/**
 * Runs `node dist/bin/feedsync.js sync --once` (or another build's cli.js, or other
 * arguments) as its own process, with the image's node flags unless told others, and measures it from spawn to exit, sampling its
 * memory every `sampleMs`. With `cpu` ({pg, redisPid, simPid}) it also measures
 * the CPU time of the worker, its Postgres backends, Redis and the simulator.
 * Resolves with the wall time, the exit code, the run's own summary line (and every log
 * line), the memory peak and the CPU times in ms. A run that exits non-zero rejects,
 * unless `anyExit` (a run against a Redis the bench stops may end 1): then `code` tells.
 * With `cgroup` (lib/memory-cgroup.mjs) the process runs inside it, as in a pod.
 */
export function runWorker(
  env,
  {
    args = ['sync', '--once'],
    sampleMs = 50,
    nodeArgs = IMAGE_NODE_FLAGS,
    timeoutMs = 600_000,
    cli = CLI,
    cpu = null,
    anyExit = false,
    cgroup = null,
  } = {},
) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const redis0 = cpu ? cpuMs(cpu.redisPid) : 0;
    const sim0 = cpu ? cpuMs(cpu.simPid) : 0;
    const argv = [...nodeArgs, cli, ...args];
    const [command, commandArgs] = cgroup ? cgroup.wrap(process.execPath, argv) : [process.execPath, argv];
    const child = spawn(command, commandArgs, {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d) => {
      stdout += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d) => {
      stderr += d;
    });
    const samples = [];
    let hwm = 0;
    let workerCpu = 0;
    const backends = cpu ? backendMeter(cpu.pg, child.pid) : null;
    const sample = () => {
      const m = memoryOf(child.pid);
      if (!m) return;
      hwm = Math.max(hwm, m.hwm, m.rss);
      samples.push({ t: performance.now() - started, rss: m.rss });
      workerCpu = cpuMs(child.pid) ?? workerCpu;
      void backends?.sample();
    };
    const timer = setInterval(sample, sampleMs);
    const killer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      const wallMs = performance.now() - started;
      clearInterval(timer);
      clearTimeout(killer);
      const lines = stdout
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l));
      const summary = lines.find((l) => l.msg === 'sync run finished');
      if (code !== 0 && !anyExit) {
        reject(new Error(`sync exited with ${code ?? signal}: ${stderr.slice(-2000)}${stdout.slice(-2000)}`));
        return;
      }
      const cpuTimes = cpu
        ? {
            worker: workerCpu,
            postgres: backends.totalMs(),
            redis: cpuMs(cpu.redisPid) - redis0,
            simulator: cpuMs(cpu.simPid) - sim0,
          }
        : null;
      resolve({ wallMs, code, summary, lines, peakRssMb: hwm / 1024, samples, cpu: cpuTimes });
    });
  });
}
