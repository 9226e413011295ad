// Whether a `sync --watch` worker's memory grows with its turns: the worker's own
// scheduler (src/cli/run-sources.ts) runs in this process, with --expose-gc, over
// caught-up sources of a simulator in a child process, as fast as it can turn
// (SYNC_INTERVAL_MS=1); every few seconds a full collection, then the heap used and
// the turns so far (the sum of the leases' tokens: one per turn).
//   npm run build && node --expose-gc bench/turns-heap.mjs [sources] [turns]
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import { loadConfig } from '../dist/config/config.js';
import { createLogger } from '../dist/logger.js';
import { prepareSchema } from './end-to-end.mjs';
import { benchPrefix, cleanUp, withPg } from './lib/env.mjs';
import { startSimChild } from './lib/simulator.mjs';
import { workerEnv } from './lib/worker.mjs';

if (typeof globalThis.gc !== 'function') throw new Error('run with node --expose-gc');

// The CLI's modules are in the bundle only (dist/bin/); the scheduler is built here from
// src/ beside the bundle (where node_modules and ../../migrations resolve), so that it runs
// in this process.
const out = new URL(`../dist/bin/bench-run-sources-${process.pid}.mjs`, import.meta.url).pathname;
await build({
  entryPoints: [new URL('../src/cli/run-sources.ts', import.meta.url).pathname],
  bundle: true,
  packages: 'external',
  format: 'esm',
  platform: 'node',
  outfile: out,
  logLevel: 'warning',
});
const { runSources } = await import(out);
rmSync(out);
const sources = Number(process.argv[2] ?? 50);
const wantedTurns = Number(process.argv[3] ?? 100_000);
const SAMPLE_MS = 5_000;
const keyOf = (i) => `sim_test_bench_heap_${i}`;

const sim = await startSimChild();
const dir = mkdtempSync(join(tmpdir(), 'feedsync-bench-heap-'));
try {
  const schema = await prepareSchema('heap');
  const env = {
    ...workerEnv({ schema, prefix: benchPrefix('heap'), baseUrl: sim.baseUrl }),
    SYNC_INTERVAL_MS: '1',
    SYNC_CONCURRENCY: '4',
    METRICS_PORT: '0',
    LOG_LEVEL: 'warn',
  };
  const entries = [];
  for (let i = 0; i < sources; i++) {
    await sim.setBacklog(1, keyOf(i));
    env[`HEAP_KEY_${i}`] = keyOf(i);
    entries.push({ source: `s${i}`, api_key_env: `HEAP_KEY_${i}` });
  }
  env.FEED_SOURCES_FILE = join(dir, 'sources.json');
  writeFileSync(env.FEED_SOURCES_FILE, JSON.stringify({ sources: entries }));
  const config = loadConfig(env);
  const watching = runSources(config, createLogger({ level: 'warn' }), { watch: true, migrate: false });

  const turns = () =>
    withPg(async (db) => {
      const { rows } = await db.query(`SELECT coalesce(sum(token), 0)::int8 AS n FROM "${schema}".leases`);
      return Number(rows[0].n);
    });
  const samples = [];
  const started = performance.now();
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, SAMPLE_MS));
    globalThis.gc();
    const n = await turns();
    const { heapUsed, rss } = process.memoryUsage();
    samples.push({
      s: Math.round((performance.now() - started) / 1000),
      turns: n,
      heapMb: heapUsed / 2 ** 20,
      rssMb: rss / 2 ** 20,
    });
    const last = samples.at(-1);
    console.log(
      `${last.s} s: ${last.turns} turns, heap ${last.heapMb.toFixed(2)} MB, rss ${last.rssMb.toFixed(1)} MB`,
    );
    if (n >= wantedTurns) break;
  }
  process.emit('SIGTERM', 'SIGTERM');
  await watching;
  // From the first sample (warmed up) to the last: bytes a turn.
  const [first, last] = [samples[0], samples.at(-1)];
  const perTurn = ((last.heapMb - first.heapMb) * 2 ** 20) / Math.max(1, last.turns - first.turns);
  console.log(
    `${sources} sources, ${last.turns} turns in ${last.s} s (${Math.round(last.turns / last.s)} turns/s): ` +
      `heap after a full GC ${first.heapMb.toFixed(2)} MB at ${first.turns} turns, ${last.heapMb.toFixed(2)} MB at ` +
      `${last.turns} (${perTurn.toFixed(1)} B a turn); rss ${first.rssMb.toFixed(0)} → ${last.rssMb.toFixed(0)} MB`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
  await sim.stop();
  await cleanUp();
}
