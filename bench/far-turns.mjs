// Far feeds side by side: 20 accounts of 1,000 events at +50 ms a page, one
// `sync --once` with SYNC_CONCURRENCY=10, against one cursor's `limit / round trip`
// measured in the same run; and each source's turn (its wall time, from its
// summary line) against the round trips of its pages alone: what a turn adds of its
// own. Each run also syncs the same accounts with the feed at +0 ms: the rate this
// machine's cores allow for the same work, which no overlap can pass.
// `--cli <path>` runs another build's bin (a before/after pair).
//   npm run build && node bench/far-turns.mjs [--cli dist/bin/feedsync.js] [--runs 3]
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { feedPagingWithLatency } from './ceilings.mjs';
import { prepareSchema } from './end-to-end.mjs';
import { benchPrefix, CLI, cleanUp } from './lib/env.mjs';
import { startSimChild } from './lib/simulator.mjs';
import { runWorker, workerEnv } from './lib/worker.mjs';

const ACCOUNTS = 20;
const EVENTS = 1_000;
const LATENCY_MS = 50;
const LIMIT = 100;
const { values } = parseArgs({ options: { cli: { type: 'string' }, runs: { type: 'string' } } });
const cli = values.cli ?? CLI;
const runs = Number(values.runs ?? 3);
const keyOf = (i) => `sim_test_bench_far_${i}`;
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

const sim = await startSimChild();
const dir = mkdtempSync(join(tmpdir(), 'feedsync-bench-far-'));
try {
  const { roundTripMs } = await feedPagingWithLatency(sim, LATENCY_MS, 30, LIMIT);
  const cursorLimit = LIMIT / (roundTripMs / 1000);
  console.log(
    `one page at +${LATENCY_MS} ms: ${roundTripMs.toFixed(1)} ms; one cursor's limit/round trip ${Math.round(cursorLimit)} events/s`,
  );
  /** One `sync --once` of the 20 accounts with the feed `latencyMs` away: its rate and its turns. */
  const syncAll = async (label, latencyMs) => {
    await sim.setLatency(0);
    const env = {
      ...workerEnv({ schema: await prepareSchema(label), prefix: benchPrefix(label), baseUrl: sim.baseUrl }),
      SYNC_CONCURRENCY: '10',
    };
    const sources = [];
    for (let i = 0; i < ACCOUNTS; i++) {
      await sim.setBacklog(EVENTS, keyOf(i));
      env[`FAR_KEY_${i}`] = keyOf(i);
      sources.push({ source: `acct-${i}`, api_key_env: `FAR_KEY_${i}` });
    }
    env.FEED_SOURCES_FILE = join(dir, 'sources.json');
    writeFileSync(env.FEED_SOURCES_FILE, JSON.stringify({ sources }));
    await sim.setLatency(latencyMs);
    const run = await runWorker(env, { cli });
    const total = ACCOUNTS * EVENTS;
    if (run.summary?.events_stored !== total)
      throw new Error(`not every event stored: ${JSON.stringify(run.summary)}`);
    return {
      run,
      rate: total / (run.summary.durationMs / 1000),
      turns: run.lines.filter((l) => l.msg === 'source finished'),
    };
  };
  for (let r = 0; r < runs; r++) {
    // The same work with the feed next door: what this machine's cores allow, the ceiling of any overlap.
    const near = await syncAll(`near${r}`, 0);
    const { run, rate, turns } = await syncAll(`far${r}`, LATENCY_MS);
    const total = ACCOUNTS * EVENTS;
    const walls = turns.map((t) => t.durationMs);
    const paging = turns.map((t) => t.pages * roundTripMs);
    const over = walls.map((wall, i) => wall - paging[i]);
    console.log(
      [
        `run ${r + 1}: ${Math.round(rate)} events/s over the run (${(rate / cursorLimit).toFixed(1)}x one cursor), ` +
          `${Math.round(total / (run.wallMs / 1000))} events/s spawn to exit; peak RSS ${run.peakRssMb.toFixed(0)} MB`,
        `  the same at +0 ms (the machine's ceiling): ${Math.round(near.rate)} events/s ` +
          `(${(near.rate / cursorLimit).toFixed(1)}x one cursor); far at ${Math.round((rate / near.rate) * 100)}% of it`,
        `  a turn (median of ${turns.length}): ${Math.round(median(walls))} ms for ${median(turns.map((t) => t.pages))} pages, ` +
          `whose round trips alone take ${Math.round(median(paging))} ms: ${Math.round(median(over))} ms of its own ` +
          `(first ten ${Math.round(median(walls.slice(0, 10)))} ms, last ten ${Math.round(median(walls.slice(10)))} ms)`,
      ].join('\n'),
    );
  }
} finally {
  await sim.setLatency(0);
  rmSync(dir, { recursive: true, force: true });
  await sim.stop();
  await cleanUp();
}
