import { spawnSync } from 'node:child_process';
import { prepareSchema } from './end-to-end.mjs';
import { benchPrefix, cleanUp, CLI } from './lib/env.mjs';
import { startSimChild } from './lib/simulator.mjs';
import { workerEnv } from './lib/worker.mjs';
const events = Number(process.argv[2] ?? 200000);
const flags = process.argv.slice(3);
const sim = await startSimChild();
try {
  const env = workerEnv({ schema: await prepareSchema('gc'), prefix: benchPrefix('gc'), baseUrl: sim.baseUrl });
  await sim.setLatency(0);
  await sim.setBacklog(events);
  const r = spawnSync(process.execPath, [...flags, CLI, 'sync', '--once'], { env, encoding: 'utf8', maxBuffer: 1e9 });
  const lines = r.stdout.split('\n').filter((l) => /Mark-Compact|Scavenge/.test(l));
  console.log(lines.filter((l) => /Mark-Compact/.test(l)).slice(-8).join('\n'));
  console.log(lines.filter((l) => /Scavenge/.test(l)).slice(-3).join('\n'));
  console.log('scavenges', lines.filter((l) => /Scavenge/.test(l)).length, 'mark-compacts', lines.filter((l) => /Mark-Compact/.test(l)).length);
  console.log(r.stdout.split('\n').find((l) => l.includes('sync run finished'))?.slice(0, 300));
} finally {
  await sim.stop();
  await cleanUp();
}
