// Many sources in one worker, and one source's catch-up, measured in one run: far feeds
// (20 accounts at +50 ms a page, SYNC_CONCURRENCY=10) against one cursor's
// `limit / round trip` and against the same work with the feed at +0 ms (what the
// cores allow, which no overlap can pass); one source of 100,000 events (median of
// three) against the slower stage alone (feed paging, Postgres ingest, the outbox
// relay), measured in the same run; many small sources against one big one; and the
// peak RSS with ten sources in flight. Part of `npm run bench`; runnable alone:
//   npm run build && node bench/run.mjs --only sources [--no-write] [--profile DIR]
// (`--profile DIR`: CPU profiles of the far run, the same at +0 ms and one catch-up)
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { feedPaging, feedPagingWithLatency, postgresIngest, relayAlone } from './ceilings.mjs';
import { prepareSchema } from './end-to-end.mjs';
import { benchPrefix, IMAGE_NODE_FLAGS } from './lib/env.mjs';
import { markdownTable, mb, pct, rate } from './lib/table.mjs';
import { runWorker, workerEnv } from './lib/worker.mjs';

const PAGE_LIMIT = 100;

/** Sizes of the three measures; `scale` shrinks them for a harness check. */
export function sourcesSizes(scale = 1) {
  const n = (x) => Math.max(1, Math.round(x * scale));
  return {
    fanOut: { accounts: 20, events: n(5_000), latencyMs: 50, concurrency: 10 },
    // The same far feeds where the cores do not bind: at +250 ms, 8× one cursor is about
    // 3,200 events/s, well under what two cores carry at +0 ms.
    farther: { latencyMs: 250 },
    many: { accounts: 100, events: n(1_000) },
    one: { events: n(100_000), runs: 3 },
    ceiling: n(100_000),
  };
}

/** A key of the simulator's for account `i` (each key is its own account, ids repeating across them). */
const keyOf = (i) => `sim_test_bench_acct_${i}`;

/**
 * Runs `sync --once` over `accounts` accounts of `events` each, from a sources file,
 * and returns the wall time, the run's summary and the worker's peak RSS.
 */
async function manySources(
  sim,
  { label, accounts, events, latencyMs = 0, concurrency = 4, profileDir = null },
) {
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
    const run = await runWorker(env, { nodeArgs: nodeArgsFor(label, profileDir) });
    const s = run.summary;
    const total = accounts * events;
    if (s?.caught_up !== accounts || s.events_stored !== total || s.jobs_published !== total) {
      throw new Error(`${label}: the run did not store and publish ${total} events: ${JSON.stringify(s)}`);
    }
    return {
      events: total,
      wallMs: run.wallMs,
      eventsPerSec: total / (run.wallMs / 1000),
      // Over the run's own duration (its summary line), as the other end-to-end rates.
      runRate: total / (s.durationMs / 1000),
      peakRssMb: run.peakRssMb,
    };
  } finally {
    await sim.setLatency(0);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The same worker over one source of `events`, without a sources file (FEED_SOURCE). */
async function oneSource(sim, { label, events, profileDir = null, cpu = null }) {
  const env = workerEnv({
    schema: await prepareSchema(label),
    prefix: benchPrefix(label),
    baseUrl: sim.baseUrl,
  });
  await sim.setLatency(0);
  await sim.setBacklog(events);
  const run = await runWorker(env, { nodeArgs: nodeArgsFor(label, profileDir), cpu });
  const s = run.summary;
  if (s?.events_stored !== events) throw new Error(`${label}: ${JSON.stringify(s)}`);
  return {
    events,
    runMs: s.durationMs,
    eventsPerSec: events / (s.durationMs / 1000),
    peakRssMb: run.peakRssMb,
    // CPU µs an event, summed over the worker, its Postgres backends, Redis and the simulator.
    cpuUsPerEvent: run.cpu ? (Object.values(run.cpu).reduce((a, b) => a + b, 0) * 1000) / events : null,
  };
}

/** The image's node flags; with `profileDir`, a CPU profile of the run there too (bench/profile-top.mjs reads it). */
const nodeArgsFor = (label, profileDir) =>
  profileDir
    ? [...IMAGE_NODE_FLAGS, '--cpu-prof', `--cpu-prof-dir=${profileDir}/${label}`]
    : IMAGE_NODE_FLAGS;

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/**
 * The measures. Rates of the far feeds and of one source are over the run's own
 * duration (its summary line: from the first lease to the last drain), as the other
 * end-to-end figures; the many-source comparison is spawn to exit, both sides alike.
 * `roundTripMs` is the bench's measured round trip of one feed page without latency;
 * `cpu` ({pg, redisPid, simPid}) is what the ceilings are measured with.
 */
export async function measureSources(sim, sizes, roundTripMs, log = () => {}, cpu = null, profileDir = null) {
  const { fanOut, farther, many, one } = sizes;
  const far = await feedPagingWithLatency(sim, fanOut.latencyMs, 30, PAGE_LIMIT);
  const farthest = await feedPagingWithLatency(sim, farther.latencyMs, 12, PAGE_LIMIT);
  log(
    `sources: ${fanOut.accounts} accounts x ${fanOut.events} events, +${fanOut.latencyMs} ms (${far.roundTripMs.toFixed(1)} ms a page), concurrency ${fanOut.concurrency}`,
  );
  const spread = await manySources(sim, { label: 'fanout', ...fanOut, profileDir });
  log(`sources: the same at +0 ms`);
  const near = await manySources(sim, { label: 'fanoutnear', ...fanOut, latencyMs: 0, profileDir });
  log(`sources: the same at +${farther.latencyMs} ms (${farthest.roundTripMs.toFixed(1)} ms a page)`);
  const slow = await manySources(sim, { label: 'fanoutfar', ...fanOut, latencyMs: farther.latencyMs });
  log(`sources: ${many.accounts} sources x ${many.events} events`);
  const small = await manySources(sim, { label: 'many', ...many });
  log(`ceilings of one source's stages, ${sizes.ceiling} events each`);
  const ceilings = {
    'feed paging': (await feedPaging(sim, sizes.ceiling, PAGE_LIMIT, cpu)).eventsPerSec,
    'Postgres ingest': (await postgresIngest(sizes.ceiling, PAGE_LIMIT * 10, cpu)).eventsPerSec,
    'outbox relay': (await relayAlone(sizes.ceiling, 1000, cpu)).eventsPerSec,
  };
  const bigs = [];
  for (let r = 0; r < one.runs; r++) {
    log(`sources: 1 source x ${one.events} events, run ${r + 1} of ${one.runs}`);
    bigs.push(
      await oneSource(sim, { label: `one${r}`, ...one, profileDir: r === 0 ? profileDir : null, cpu }),
    );
  }
  const big = bigs.find((b) => b.eventsPerSec === median(bigs.map((x) => x.eventsPerSec)));
  const cursorLimit = PAGE_LIMIT / (far.roundTripMs / 1000);
  return {
    sizes,
    roundTripMs,
    farRoundTripMs: far.roundTripMs,
    cursorLimit,
    slowRoundTripMs: farthest.roundTripMs,
    slow,
    spread,
    near,
    small,
    ceilings,
    bigs,
    big,
  };
}

export function sourcesRows(r) {
  const { fanOut, farther, many, one } = r.sizes;
  const multiple = r.spread.runRate / r.cursorLimit;
  const slowLimit = PAGE_LIMIT / (r.slowRoundTripMs / 1000);
  const slowMultiple = r.slow.runRate / slowLimit;
  // What the cores allow at +50 ms: the same work at +0 ms, as a multiple of one cursor there.
  const coresAllow = r.near.runRate / r.cursorLimit;
  // The stages share the cores: all of them at once carry no more than this.
  const cores = availableParallelism();
  const coresCarry = r.big.cpuUsPerEvent ? (cores * 1e6) / r.big.cpuUsPerEvent : 0;
  const ofNear = r.spread.runRate / r.near.runRate;
  const [slowest, ceiling] = Object.entries(r.ceilings).sort((a, b) => a[1] - b[1])[0];
  const ofCeiling = r.big.eventsPerSec / ceiling;
  const share = r.small.eventsPerSec / r.big.eventsPerSec;
  const thousands = (x) => x.toLocaleString('en-US');
  return [
    {
      measure: `${fanOut.accounts} accounts x ${thousands(fanOut.events)} events, +${fanOut.latencyMs} ms a page, SYNC_CONCURRENCY=${fanOut.concurrency}`,
      result: rate(r.spread.runRate),
      against: `one cursor's limit/round trip ${rate(r.cursorLimit)} (${r.farRoundTripMs.toFixed(1)} ms a page); the cores allow ${coresAllow.toFixed(1)}× (the +0 ms run)`,
      ratio: `${multiple.toFixed(1)}×`,
      target: '≥ 8×',
      ok: multiple >= 8,
    },
    {
      measure: `  the same at +${farther.latencyMs} ms a page (the cores not the bound)`,
      result: rate(r.slow.runRate),
      against: `one cursor's limit/round trip ${rate(slowLimit)} (${r.slowRoundTripMs.toFixed(1)} ms a page)`,
      ratio: `${slowMultiple.toFixed(1)}×`,
      target: '≥ 8×',
      ok: slowMultiple >= 8,
    },
    {
      measure: '  the same work at +0 ms (what the cores allow for it)',
      result: rate(r.near.runRate),
      against: 'far feeds above, as a share of it',
      ratio: pct(ofNear),
      target: '≥ 90%',
      ok: ofNear >= 0.9,
    },
    {
      measure: `1 source x ${thousands(one.events)} events (median of ${r.bigs.length}: ${r.bigs.map((b) => Math.round(b.eventsPerSec)).join(', ')})`,
      result: rate(r.big.eventsPerSec),
      against: `slower stage alone, ${slowest} ${rate(ceiling)} (${Object.entries(r.ceilings)
        .map(([name, x]) => `${name} ${thousands(Math.round(x))}`)
        .join(', ')})`,
      ratio: pct(ofCeiling),
      target: '≥ 95%',
      ok: ofCeiling >= 0.95,
    },
    ...(r.big.cpuUsPerEvent
      ? [
          {
            measure: '  the same run against what the cores carry at its CPU an event',
            result: rate(r.big.eventsPerSec),
            against: `${cores} cores / ${Math.round(r.big.cpuUsPerEvent)} µs an event (worker, Postgres, Redis, simulator) = ${rate(coresCarry)}`,
            ratio: pct(r.big.eventsPerSec / coresCarry),
            target: '',
            ok: null,
          },
        ]
      : []),
    {
      measure: `${many.accounts} sources x ${thousands(many.events)} events, one worker (spawn to exit)`,
      result: rate(r.small.eventsPerSec),
      against: `1 source x ${thousands(one.events)} events ${rate(r.big.eventsPerSec)}`,
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
