// Cold start of one build or several, side by side: `sync --once` against a feed that
// is caught up, process start to exit, the builds taking turns so that a machine
// slower for a while slows them alike.
//   node bench/cold-start.mjs [--runs N] [--events N] [path/to/dist/bin/feedsync.js …]
// (default: this build, 7 runs, a store of 20,000 events; `npm run bench` measures after its
// 1,000,000-event run)
import { coldStart, median, syncOnce } from './end-to-end.mjs';
import { CLI, cleanUp } from './lib/env.mjs';
import { startSimChild } from './lib/simulator.mjs';

const args = process.argv.slice(2);
const options = new Map();
const clis = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--runs' || args[i] === '--events') options.set(args[i], Number(args[++i]));
  else clis.push(args[i]);
}
if (clis.length === 0) clis.push(CLI);
const runs = options.get('--runs') ?? 7;
const events = options.get('--events') ?? 20_000;
for (const [name, value] of options) {
  if (!Number.isInteger(value) || value < 1) {
    console.error(`${name}: a whole number of at least 1`);
    process.exit(2);
  }
}

const sim = await startSimChild();
try {
  // One build catches the feed up; every later run finds nothing new.
  const caughtUp = await syncOnce(sim, { label: 'cold', events, keep: true });
  const results = new Map(clis.map((cli) => [cli, { ms: [], rssMb: [] }]));
  for (let round = 1; round <= runs; round++) {
    for (const cli of clis) {
      const run = await coldStart(caughtUp.env, 1, { cli, sampleMs: 25 });
      results.get(cli).ms.push(...run.times);
      results.get(cli).rssMb.push(...run.peakRssMb);
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
