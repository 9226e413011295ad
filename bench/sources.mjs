// Many sources in one worker: the aggregate rate of SYNC_CONCURRENCY cursors at
// +50 ms a page, many small sources against one big one, and the peak RSS with ten
// sources in flight. Part of `npm run bench`; runnable alone:
//   npm run build && node bench/sources.mjs [--quick] [--no-write]
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { feedPagingWithLatency } from './ceilings.mjs';
import { prepareSchema } from './end-to-end.mjs';
import { benchPrefix, cleanUp } from './lib/env.mjs';
import { describeMachine } from './lib/machine.mjs';
import { writeBlock } from './lib/page.mjs';
import { startSimChild } from './lib/simulator.mjs';
import { markdownTable, mb, pct, rate } from './lib/table.mjs';
import { runWorker, workerEnv } from './lib/worker.mjs';

const PAGE_LIMIT = 100;

/** Sizes of the three measures; `scale` shrinks them for a harness check. */
export function sourcesSizes(scale = 1) {
  const n = (x) => Math.max(1, Math.round(x * scale));
  return {
    fanOut: { accounts: 20, events: n(5_000), latencyMs: 50, concurrency: 10 },
    many: { accounts: 100, events: n(1_000) },
    one: { events: n(100_000) },
  };
}

/** A key of the simulator's for account `i` (each key is its own account, ids repeating across them). */
const keyOf = (i) => `sim_test_bench_acct_${i}`;

/**
 * Runs `sync --once` over `accounts` accounts of `events` each, from a sources file,
 * and returns the wall time, the run's summary and the worker's peak RSS.
 */
async function manySources(sim, { label, accounts, events, latencyMs = 0, concurrency = 4 }) {
  const dir = mkdtempSync(join(tmpdir(), 'feedsync-bench-sources-'));
  try {
    await sim.setLatency(0);
    const env = {
      ...workerEnv({ schema: await prepareSchema(label), prefix: benchPrefix(label), baseUrl: sim.baseUrl }),
      SYNC_CONCURRENCY: String(concurrency),
    };
    const sources = [];
    for (let i = 0; i < accounts; i++) {
      await sim.setBacklog(events, keyOf(i));
      env[`BENCH_KEY_${i}`] = keyOf(i);
      sources.push({ source: `acct-${i}`, api_key_env: `BENCH_KEY_${i}` });
    }
    env.FEED_SOURCES_FILE = join(dir, 'sources.json');
    writeFileSync(env.FEED_SOURCES_FILE, JSON.stringify({ sources }));
    await sim.setLatency(latencyMs);
    const run = await runWorker(env);
    const s = run.summary;
    const total = accounts * events;
    if (s?.caught_up !== accounts || s.events_stored !== total || s.jobs_published !== total) {
      throw new Error(`${label}: the run did not store and publish ${total} events: ${JSON.stringify(s)}`);
    }
    return {
      events: total,
      wallMs: run.wallMs,
      eventsPerSec: total / (run.wallMs / 1000),
      peakRssMb: run.peakRssMb,
    };
  } finally {
    await sim.setLatency(0);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The same worker over one source of `events`, without a sources file (FEED_SOURCE). */
async function oneSource(sim, { label, events }) {
  const env = workerEnv({
    schema: await prepareSchema(label),
    prefix: benchPrefix(label),
    baseUrl: sim.baseUrl,
  });
  await sim.setLatency(0);
  await sim.setBacklog(events);
  const run = await runWorker(env);
  const s = run.summary;
  if (s?.events_stored !== events) throw new Error(`${label}: ${JSON.stringify(s)}`);
  return {
    events,
    runMs: s.durationMs,
    eventsPerSec: events / (s.durationMs / 1000),
    peakRssMb: run.peakRssMb,
  };
}

/**
 * The three measures. Rates are over the run's own duration (its summary line: from
 * the first source's lock to the last drain), as for the other end-to-end figures.
 * `roundTripMs` is the bench's measured round trip of one feed page without latency.
 */
export async function measureSources(sim, sizes, roundTripMs, log = () => {}) {
  const { fanOut, many, one } = sizes;
  log(
    `sources: ${fanOut.accounts} accounts x ${fanOut.events} events, +${fanOut.latencyMs} ms, concurrency ${fanOut.concurrency}`,
  );
  const spread = await manySources(sim, { label: 'fanout', ...fanOut });
  log(`sources: ${many.accounts} sources x ${many.events} events`);
  const small = await manySources(sim, { label: 'many', ...many });
  log(`sources: 1 source x ${one.events} events`);
  const big = await oneSource(sim, { label: 'one', ...one });
  const cursorLimit = PAGE_LIMIT / ((fanOut.latencyMs + roundTripMs) / 1000);
  return { sizes, roundTripMs, cursorLimit, spread, small, big };
}

export function sourcesRows(r) {
  const { fanOut, many, one } = r.sizes;
  const multiple = r.spread.eventsPerSec / r.cursorLimit;
  const share = r.small.eventsPerSec / r.big.eventsPerSec;
  return [
    {
      measure: `${fanOut.accounts} accounts x ${fanOut.events.toLocaleString('en-US')} events, +${fanOut.latencyMs} ms a page, SYNC_CONCURRENCY=${fanOut.concurrency}`,
      result: rate(r.spread.eventsPerSec),
      against: `one cursor's limit/round trip ${rate(r.cursorLimit)}`,
      ratio: `${multiple.toFixed(1)}×`,
      target: '≥ 6×',
      ok: multiple >= 6,
    },
    {
      measure: `${many.accounts} sources x ${many.events.toLocaleString('en-US')} events, one worker`,
      result: rate(r.small.eventsPerSec),
      against: `1 source x ${one.events.toLocaleString('en-US')} events ${rate(r.big.eventsPerSec)}`,
      ratio: pct(share),
      target: '≥ 70%',
      ok: share >= 0.7,
    },
    {
      measure: `peak RSS, ${fanOut.concurrency} sources in flight`,
      result: mb(r.spread.peakRssMb),
      against: `1 source ${mb(r.big.peakRssMb)}`,
      target: '≤ 200 MB',
      ok: r.spread.peakRssMb <= 200,
    },
  ];
}

/** The measured part of the Sources section of docs/BENCHMARKS.md. */
export function sourcesSection(r, machineLine) {
  return [
    `Measured ${new Date().toISOString().slice(0, 10)}; ${machineLine}.`,
    `One page round trip without latency: ${r.roundTripMs.toFixed(2)} ms.`,
    '',
    markdownTable(sourcesRows(r)),
  ].join('\n');
}

/** Alone: its own simulator, the round trip measured here, then the three measures. */
async function main() {
  const args = process.argv.slice(2);
  const quick = args.includes('--quick');
  const log = (msg) => console.log(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}`);
  const machine = await describeMachine();
  const sim = await startSimChild();
  try {
    const { roundTripMs } = await feedPagingWithLatency(sim, 0, 60, PAGE_LIMIT);
    const results = await measureSources(sim, sourcesSizes(quick ? 0.1 : 1), roundTripMs, log);
    const line = `${machine.cpu}, ${machine.memory}, load at start ${machine.loadAtStart}`;
    console.log(`\n${markdownTable(sourcesRows(results))}\n`);
    if (!quick && !args.includes('--no-write')) {
      const page = new URL('../docs/BENCHMARKS.md', import.meta.url).pathname;
      writeBlock(page, 'sources', sourcesSection(results, line));
      console.log(`wrote ${page}`);
    }
  } finally {
    await sim.stop();
    await cleanUp();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
