import { spawn } from 'node:child_process';
import { prepareSchema } from './end-to-end.mjs';
import { benchPrefix, cleanUp, CLI } from './lib/env.mjs';
import { startSimChild } from './lib/simulator.mjs';
import { workerEnv } from './lib/worker.mjs';
const sim = await startSimChild();
try {
  const env = workerEnv({ schema: await prepareSchema('snap'), prefix: benchPrefix('snap'), baseUrl: sim.baseUrl });
  await sim.setLatency(0);
  await sim.setBacklog(200000);
  const child = spawn(process.execPath, ['--heapsnapshot-signal=SIGUSR2', CLI, 'sync', '--once'], { env, cwd: '/tmp/prof', stdio: 'ignore' });
  setTimeout(() => child.kill('SIGUSR2'), 8000);
  await new Promise((r) => child.on('exit', r));
} finally {
  await sim.stop();
  await cleanUp();
}
