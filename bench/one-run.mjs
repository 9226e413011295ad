// One `sync --once` over a synthetic backlog, with node flags of your choosing: for
// profiles and quick comparisons between builds.
//   node bench/one-run.mjs [--events N] [--cli path/to/dist/bin/feedsync.js] [-- node flags…, else the image's]
//   node bench/one-run.mjs --events 200000 -- --cpu-prof --cpu-prof-dir=/tmp/prof
import { execFileSync } from 'node:child_process';
import pg from 'pg';
import { syncOnce } from './end-to-end.mjs';
import { benchSchema, cleanUp, DATABASE_URL } from './lib/env.mjs';
import { redisPid } from './lib/machine.mjs';
import { startSimChild } from './lib/simulator.mjs';

const args = process.argv.slice(2);
const dashes = args.indexOf('--');
const own = dashes >= 0 ? args.slice(0, dashes) : args;
// Without `--`, the image's node flags (bench/lib/env.mjs).
const nodeArgs = dashes >= 0 ? args.slice(dashes + 1) : undefined;
const option = (name, fallback) => {
  const at = own.indexOf(name);
  return at >= 0 ? own[at + 1] : fallback;
};
const events = Number(option('--events', '200000'));
const cli = option('--cli', undefined);

const sim = await startSimChild();
const monitor = new pg.Client({ connectionString: DATABASE_URL });
await monitor.connect();
try {
  const cpu = { pg: monitor, redisPid: await redisPid(), simPid: sim.pid };
  // Another build migrates its own schema: its statements need its own version of it.
  let schema;
  if (cli) {
    schema = benchSchema('other');
    execFileSync(process.execPath, [cli, 'migrate'], {
      env: { PATH: process.env.PATH, DATABASE_URL, DATABASE_SCHEMA: schema },
      stdio: 'ignore',
    });
  }
  const run = await syncOnce(sim, { label: 'one', events, nodeArgs, cpu, cli, schema });
  const per = (ms) => ((ms * 1000) / events).toFixed(1);
  const c = run.cpu;
  console.log(
    `${events} events: ${Math.round(run.eventsPerSec)} events/s, peak RSS ${Math.round(run.peakRssMb)} MB; ` +
      `CPU µs/event worker ${per(c.worker)} postgres ${per(c.postgres)} redis ${per(c.redis)} simulator ${per(c.simulator)} ` +
      `total ${per(c.worker + c.postgres + c.redis + c.simulator)}`,
  );
} finally {
  await monitor.end();
  await sim.stop();
  await cleanUp();
}
