// `feedsync verify` over stores of growing size: its time and memory peak, and one
// run with two rows lost and --repair. Memory must not grow with the feed: verify
// pages through the catch-up's held pages, never the whole feed.
//   node bench/verify.mjs [--events 50000,200000]
import { syncOnce } from './end-to-end.mjs';
import { cleanUp, withPg } from './lib/env.mjs';
import { startSimChild } from './lib/simulator.mjs';
import { runWorker } from './lib/worker.mjs';

const at = process.argv.indexOf('--events');
const sizes = (at >= 0 ? process.argv[at + 1] : '50000,200000').split(',').map(Number);

const sim = await startSimChild();
try {
  for (const events of sizes) {
    const synced = await syncOnce(sim, { label: `verify_${events}`, events, keep: true });
    const { env } = synced;
    const clean = await runWorker(env, { args: ['verify'] });
    const lost = [
      `evt_${String(Math.ceil(events / 5)).padStart(12, '0')}`,
      `evt_${String(events - 1).padStart(12, '0')}`,
    ];
    await withPg((pg) => pg.query(`DELETE FROM "${env.DATABASE_SCHEMA}".events WHERE id = ANY($1)`, [lost]));
    const repair = await runWorker(env, { args: ['verify', '--repair'], anyExit: true });
    const again = await runWorker(env, { args: ['verify'] });
    const line = (label, run) =>
      `  ${label.padEnd(16)} exit ${run.code}, ${(run.wallMs / 1000).toFixed(1)} s, ` +
      `${Math.round(events / (run.wallMs / 1000))} events/s, peak RSS ${Math.round(run.peakRssMb)} MB`;
    console.log(`${events} events (sync --once ${Math.round(synced.eventsPerSec)} events/s):`);
    console.log(line('verify', clean));
    console.log(line('verify --repair', repair));
    console.log(line('verify again', again));
  }
} finally {
  await sim.stop();
  await cleanUp();
}
