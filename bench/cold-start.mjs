// Cold start of one build or several, side by side: `sync --once` against a feed that
// is caught up, process start to exit, the builds taking turns so that a machine
// slower for a while slows them alike.
//   node bench/cold-start.mjs [--runs N] [path/to/dist/bin/feedsync.js …]   (default: this build)
import { median, syncOnce } from './end-to-end.mjs';
import { CLI, cleanUp } from './lib/env.mjs';
import { startSimChild } from './lib/simulator.mjs';
import { runWorker } from './lib/worker.mjs';

const args = process.argv.slice(2);
const runsAt = args.indexOf('--runs');
const runs = runsAt >= 0 ? Number(args[runsAt + 1]) : 7;
const clis = args.filter((_, i) => runsAt < 0 || (i !== runsAt && i !== runsAt + 1));
if (clis.length === 0) clis.push(CLI);
if (!(runs >= 1)) {
  console.error('--runs: a whole number of at least 1');
  process.exit(2);
}

const sim = await startSimChild();
try {
  // One build catches the feed up; every later run finds nothing new.
  const caughtUp = await syncOnce(sim, { label: 'cold', events: 20_000, keep: true });
  const results = new Map(clis.map((cli) => [cli, { ms: [], rssMb: [] }]));
  for (let round = 1; round <= runs; round++) {
    for (const cli of clis) {
      const run = await runWorker(caughtUp.env, { cli, sampleMs: 25 });
      if (run.summary?.events_stored !== 0) throw new Error(`${cli}: the feed was not caught up`);
      results.get(cli).ms.push(run.wallMs);
      results.get(cli).rssMb.push(run.peakRssMb);
    }
    process.stderr.write(`\rround ${round}/${runs}`);
  }
  process.stderr.write('\n');
  for (const [cli, r] of results) {
    console.log(
      `${cli}: median ${Math.round(median(r.ms))} ms (${r.ms.map(Math.round).join(', ')}), ` +
        `peak RSS median ${Math.round(median(r.rssMb))} MB`,
    );
  }
} finally {
  await sim.stop();
  await cleanUp();
}
