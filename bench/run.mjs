// `npm run bench`: the ceilings, feedsync end to end, latency, memory, cold start
// and a grown events table, measured in one run on this machine, printed as one
// table and written into docs/BENCHMARKS.md (between its bench markers).
// `--quick` runs everything at a tenth of the size to check the harness (and
// writes nothing); `--no-write` leaves the page alone; `--json FILE` also writes
// the raw results; `--only <section>` runs one section alone: sources (bench/sources.mjs)
// page-memory (bench/page-memory.mjs), lane-memory (bench/lane-memory.mjs), relay-memory
// (bench/relay-memory.mjs), retention (bench/retention.mjs), consumer (bench/consumer.mjs),
// apply-cost (bench/apply-cost.mjs), queue-backends (bench/queue-backends.mjs: sync --once
// and the consumer on Redis and on Postgres), page-handoff (bench/page-handoff.mjs: the relay
// against jobs added by the page's own transaction), budget (bench/budget.mjs: a catch-up
// under a stated request budget beside the application's sends)
// or tracing (bench/tracing.mjs; `--before PATH` adds another build's
// dist/bin/feedsync.js), which rewrite only their block of the page.
import { writeFileSync } from 'node:fs';
import pg from 'pg';
import { applyCost, applyCostRows } from './apply-cost.mjs';
import { budgetAlone, budgetRows } from './budget.mjs';
import { bullmqAddBulk, feedPaging, feedPagingWithLatency, postgresIngest, relayAlone } from './ceilings.mjs';
import { consumerAlone, consumerRows } from './consumer.mjs';
import { coldStart, prepareSchema, release, rssHalves, syncOnce } from './end-to-end.mjs';
import { fillStore } from './growth.mjs';
import { laneMemory, laneMemoryRows } from './lane-memory.mjs';
import { cleanUp, DATABASE_URL } from './lib/env.mjs';
import { describeMachine, redisPid } from './lib/machine.mjs';
import { measuredSection, writeBlock, writeMeasured } from './lib/page.mjs';
import { startSimChild } from './lib/simulator.mjs';
import { cpuTable, markdownTable, mb, ms, pct, rate } from './lib/table.mjs';
import { pageHandoffAlone, pageHandoffRows } from './page-handoff.mjs';
import { pageMemory, pageMemoryRows } from './page-memory.mjs';
import { queueBackendsAlone, queueBackendsRows } from './queue-backends.mjs';
import { relayMemory, relayMemoryRows } from './relay-memory.mjs';
import { retentionAlone, retentionRows } from './retention.mjs';
import { measureSources, sourcesSection, sourcesSizes } from './sources.mjs';
import { tracingAlone, tracingRows } from './tracing.mjs';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const jsonAt = args.indexOf('--json');
const jsonFile = jsonAt >= 0 ? args[jsonAt + 1] : null;
const writePage = !quick && !args.includes('--no-write');
const onlyAt = args.indexOf('--only');
const only = onlyAt >= 0 ? args[onlyAt + 1] : null;
/** `--before PATH`: another build's dist/bin/feedsync.js, which the tracing section runs beside this one. */
const beforeAt = args.indexOf('--before');
const before = beforeAt >= 0 ? args[beforeAt + 1] : null;
/** Sections that run alone, each with its own block of the page (sources writes its own). */
const ALONE = {
  'page-memory': {
    title: 'Memory by page size',
    run: () => pageMemory({ scale: quick ? 0.25 : 1, log }),
    rows: pageMemoryRows,
  },
  'lane-memory': {
    title: 'Memory by lanes: SYNC_CONCURRENCY with pages near the response limit',
    run: () => laneMemory({ scale: quick ? 0.5 : 1, log }),
    rows: laneMemoryRows,
  },
  'relay-memory': {
    title: 'Memory with events that reach the relay, plain node and the image flags',
    run: () => relayMemory({ scale: quick ? 0.1 : 1, log }),
    rows: relayMemoryRows,
  },
  retention: {
    title: 'Retention under load',
    run: () => retentionAlone({ scale, log }),
    rows: retentionRows,
  },
  consumer: {
    title: 'The consumer: the inbox against a bare Worker',
    run: () => consumerAlone({ scale, log }),
    rows: consumerRows,
  },
  'apply-cost': {
    title: 'The apply statement with contact_status and suppressions',
    run: () => applyCost({ scale, log }),
    rows: applyCostRows,
  },
  'queue-backends': {
    title: 'The queues in Redis and in Postgres, side by side',
    run: () => queueBackendsAlone({ scale, log }),
    rows: queueBackendsRows,
  },
  'page-handoff': {
    title: "A page's jobs: the outbox relay, or the page's own transaction",
    run: () => pageHandoffAlone({ scale, log }),
    rows: pageHandoffRows,
  },
  budget: {
    title: "A catch-up within a request budget shared with the application's sends",
    run: () => budgetAlone({ scale, log }),
    rows: budgetRows,
  },
  tracing: {
    title: 'Traces: CPU per event, off and on',
    run: () => tracingAlone({ scale, log, before }),
    rows: tracingRows,
  },
};
if (only !== null && only !== 'sources' && only !== 'pipeline' && !ALONE[only]) {
  console.error(
    `--only: unknown section "${only}" (known: sources, pipeline, ${Object.keys(ALONE).join(', ')})`,
  );
  process.exit(2);
}
const PAGE = new URL('../docs/BENCHMARKS.md', import.meta.url).pathname;
const scale = quick ? 0.1 : 1;
const n = (x) => Math.round(x * scale);

/** feedsync's defaults: FEED_PAGE_LIMIT, pages per transaction while catching up, relay batch. */
const PAGE_LIMIT = 100;
const PAGES_PER_COMMIT = 10;
const RELAY_BATCH = 1000;
const SIZES = {
  ceiling: n(100_000),
  endToEnd: n(200_000),
  latency: n(20_000),
  memory: n(1_000_000),
  stored: n(5_000_000),
  coldRuns: 5,
  latencyPages: 60,
};

const log = (msg) => console.log(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}`);

/** Runs one section of ALONE, prints its table and writes its block. Returns its results. */
async function runAlone(name, machine) {
  const section = ALONE[name];
  const started = performance.now();
  const results = await section.run();
  const table = markdownTable(section.rows(results));
  console.log('');
  console.log(`${section.title}:`);
  console.log(table);
  if (writePage) {
    const seconds = Math.round((performance.now() - started) / 1000);
    writeBlock(
      PAGE,
      name,
      `Measured ${new Date().toISOString().slice(0, 10)} with \`node bench/run.mjs --only ${name}\` (${seconds} s). ` +
        `${machineLine(machine)}\n\n${table}`,
    );
    console.log(`wrote the ${name} block of ${PAGE}`);
  }
  return results;
}

async function main() {
  const started = performance.now();
  const machine = await describeMachine();
  if (only !== null && ALONE[only]) {
    try {
      await runAlone(only, machine);
    } finally {
      await cleanUp();
    }
    return;
  }
  const sim = await startSimChild();
  const monitor = new pg.Client({ connectionString: DATABASE_URL });
  await monitor.connect();
  const cpu = { pg: monitor, redisPid: await redisPid(), simPid: sim.pid };
  const results = { machine, sizes: SIZES };
  try {
    if (only === 'sources') {
      const { roundTripMs } = await feedPagingWithLatency(sim, 0, SIZES.latencyPages, PAGE_LIMIT);
      await sources(sim, roundTripMs, machine);
      return;
    }
    const pipelineOnly = only === 'pipeline';
    log(`feed paging alone, ${SIZES.ceiling} events`);
    const paging = await feedPaging(sim, SIZES.ceiling, PAGE_LIMIT, cpu);
    log(`Postgres ingest alone, ${SIZES.ceiling} events`);
    const ingest = await postgresIngest(SIZES.ceiling, PAGE_LIMIT * PAGES_PER_COMMIT, cpu);
    log(`BullMQ addBulk alone, ${SIZES.ceiling} jobs`);
    const addBulk = await bullmqAddBulk(SIZES.ceiling, RELAY_BATCH, cpu);
    log(`outbox relay alone, ${SIZES.ceiling} rows`);
    const relay = await relayAlone(SIZES.ceiling, RELAY_BATCH, cpu);
    Object.assign(results, { paging, ingest, addBulk, relay });

    let grownSchema = null;
    if (!pipelineOnly) {
      results.pagingAt = {};
      for (const latencyMs of [20, 50]) {
        log(`feed paging alone, ${SIZES.latencyPages} pages, +${latencyMs} ms a page`);
        results.pagingAt[latencyMs] = await feedPagingWithLatency(
          sim,
          latencyMs,
          SIZES.latencyPages,
          PAGE_LIMIT,
        );
      }
      log(`filling a schema with ${SIZES.stored} stored events`);
      const fillStarted = performance.now();
      grownSchema = await prepareSchema('grown', (store) => fillStore(store, SIZES.stored));
      results.fillSeconds = (performance.now() - fillStarted) / 1000;
    }
    // The empty and the grown runs back to back, so that they see the same machine.
    log(`sync --once, ${SIZES.endToEnd} events, empty store`);
    results.plain = await syncOnce(sim, { label: 'plain', events: SIZES.endToEnd, cpu });
    if (!pipelineOnly) {
      log(`sync --once, ${SIZES.endToEnd} events, ${SIZES.stored} already stored`);
      results.grown = await syncOnce(sim, {
        label: 'grown',
        events: SIZES.endToEnd,
        schema: grownSchema,
        cpu,
      });
      results.latency = [];
      for (const latencyMs of [20, 50]) {
        log(`sync --once, ${SIZES.latency} events, +${latencyMs} ms a page`);
        results.latency.push(
          await syncOnce(sim, { label: `lat${latencyMs}`, events: SIZES.latency, latencyMs }),
        );
      }
    }

    log(`sync --once, ${SIZES.memory} events (memory)`);
    const big = await syncOnce(sim, { label: 'memory', events: SIZES.memory, keep: true });
    log(`cold start, caught-up feed, ${SIZES.coldRuns} runs`);
    const cold = await coldStart(big.env, SIZES.coldRuns);
    await release(big);
    Object.assign(results, { big, cold });
    if (!pipelineOnly) {
      results.sources = await sources(sim, paging.roundTripMs, machine);
      for (const name of Object.keys(ALONE)) results[name] = await runAlone(name, machine);
    }

    const rows = tableRows(results);
    const table = markdownTable(rows);
    results.rows = rows;
    results.totalSeconds = (performance.now() - started) / 1000;
    console.log('');
    console.log(machineLine(machine));
    console.log('');
    console.log(table);
    console.log('');
    const cpuText = cpuTable(cpuRows(results));
    console.log(cpuText);
    console.log('');
    console.log(`(${Math.round(results.totalSeconds)} s in all)`);
    if (jsonFile) writeFileSync(jsonFile, `${JSON.stringify(stripSamples(results), null, 2)}\n`);
    if (writePage && !pipelineOnly) {
      writeMeasured(PAGE, measuredSection({ ...results, machine, table, cpuTable: cpuText, sizes: SIZES }));
      console.log(`wrote ${PAGE}`);
    }
  } finally {
    await monitor.end();
    await sim.stop();
    await cleanUp();
  }
}

/** CPU time per event of one measurement, per process and in all, in µs. */
function perEvent(c, events) {
  const per = (ms) => (ms == null ? null : (ms * 1000) / events);
  const row = {
    worker: per(c.worker ?? c.bench),
    postgres: per(c.postgres),
    redis: per(c.redis),
    simulator: per(c.simulator),
  };
  return { ...row, total: Object.values(row).reduce((sum, v) => sum + (v ?? 0), 0) };
}

/** The parts whose sum the end-to-end CPU per event is held against: paging, ingest, addBulk. */
function partsTotal(r) {
  const n = r.sizes.ceiling;
  return perEvent(r.paging.cpu, n).total + perEvent(r.ingest.cpu, n).total + perEvent(r.addBulk.cpu, n).total;
}

/** CPU time per event of every process involved, for the ceilings and the end-to-end runs. */
function cpuRows(r) {
  const n = r.sizes.ceiling;
  const rows = [
    { measure: 'feed paging alone (bench process: client)', ...perEvent(r.paging.cpu, n) },
    { measure: 'Postgres ingest alone (bench process: applier)', ...perEvent(r.ingest.cpu, n) },
    { measure: 'BullMQ addBulk alone (bench process: publisher)', ...perEvent(r.addBulk.cpu, n) },
    { measure: 'outbox relay alone (bench process: relay)', ...perEvent(r.relay.cpu, n) },
    {
      measure: `sync --once, ${r.plain.events.toLocaleString('en-US')} events`,
      ...perEvent(r.plain.cpu, r.plain.events),
    },
  ];
  if (r.grown) {
    rows.push({
      measure: `sync --once, ${r.grown.events.toLocaleString('en-US')} events, ${r.sizes.stored / 1e6}M stored`,
      ...perEvent(r.grown.cpu, r.grown.events),
    });
  }
  return rows;
}

function tableRows(r) {
  const [slowName, slow] = [
    ['Postgres ingest', r.ingest],
    ['outbox relay', r.relay],
  ].reduce((a, b) => (b[1].eventsPerSec < a[1].eventsPerSec ? b : a));
  const share = r.plain.eventsPerSec / slow.eventsPerSec;
  const parts = partsTotal(r);
  const endToEndCpu = perEvent(r.plain.cpu, r.plain.events).total;
  const rows = [
    {
      measure: `feed paging alone (limit ${PAGE_LIMIT}, sequential)`,
      result: rate(r.paging.eventsPerSec),
      against: `${r.paging.roundTripMs.toFixed(2)} ms a round trip`,
    },
    {
      measure: `Postgres ingest alone (applier, ${PAGE_LIMIT * PAGES_PER_COMMIT} a transaction)`,
      result: rate(r.ingest.eventsPerSec),
    },
    {
      measure: `BullMQ addBulk alone (publisher, ${RELAY_BATCH} jobs a call)`,
      result: rate(r.addBulk.eventsPerSec),
    },
    {
      measure: `outbox relay alone (${RELAY_BATCH} rows a step: select, addBulk, mark)`,
      result: rate(r.relay.eventsPerSec),
    },
    {
      measure: `sync --once, ${r.plain.events.toLocaleString('en-US')} events`,
      result: rate(r.plain.eventsPerSec),
      against: `slower of ingest and relay alone (${slowName})`,
      ratio: pct(share),
      target: '≥ 90%',
      ok: share >= 0.9,
    },
    {
      measure: '  its CPU per event, all processes',
      result: `${endToEndCpu.toFixed(1)} µs`,
      against: `paging + ingest + addBulk alone ${parts.toFixed(1)} µs`,
      ratio: `${(endToEndCpu / parts).toFixed(2)}×`,
      target: '≤ 1.05×, ≤ 90 µs',
      ok: endToEndCpu / parts <= 1.05 && endToEndCpu <= 90,
    },
  ];
  for (const run of r.latency ?? []) {
    const limit = PAGE_LIMIT / ((run.latencyMs + r.paging.roundTripMs) / 1000);
    const ratio = run.eventsPerSec / limit;
    const paged = r.pagingAt[run.latencyMs];
    rows.push({
      measure: `sync --once, ${run.events.toLocaleString('en-US')} events, +${run.latencyMs} ms a page`,
      result: rate(run.eventsPerSec),
      against: `limit/round trip ${rate(limit)}`,
      ratio: pct(ratio),
      target: run.latencyMs === 50 ? '≥ 95%' : '',
      ok: run.latencyMs === 50 ? ratio >= 0.95 : null,
    });
    rows.push({
      measure: `  the same against feed paging alone at +${run.latencyMs} ms`,
      result: '',
      against: `${rate(paged.eventsPerSec)} (${paged.roundTripMs.toFixed(1)} ms a page)`,
      ratio: pct(run.eventsPerSec / paged.eventsPerSec),
    });
  }
  const halves = rssHalves(r.big.samples);
  const flat = r.big.peakRssMb / r.plain.peakRssMb;
  rows.push(
    {
      measure: `peak RSS, ${r.big.events.toLocaleString('en-US')}-event catch-up`,
      result: mb(r.big.peakRssMb),
      against: `${r.plain.events.toLocaleString('en-US')}-event run ${mb(r.plain.peakRssMb)}; halves ${mb(halves.firstMb)} / ${mb(halves.secondMb)}`,
      ratio: `${flat.toFixed(2)}×`,
      target: '≤ 110 MB, flat',
      ok: r.big.peakRssMb <= 110 && flat <= 1.15,
    },
    {
      measure: `cold start, caught-up feed (median of ${r.cold.times.length})`,
      result: ms(r.cold.medianMs),
      against: `runs ${r.cold.times.map((t) => Math.round(t)).join(', ')} ms`,
      target: '≤ 400 ms',
      ok: r.cold.medianMs <= 400,
    },
  );
  if (r.grown) {
    const grownRatio = r.grown.eventsPerSec / r.plain.eventsPerSec;
    rows.push({
      measure: `sync --once, ${r.grown.events.toLocaleString('en-US')} events, ${(r.sizes.stored / 1e6).toLocaleString('en-US')}M already stored`,
      result: rate(r.grown.eventsPerSec),
      against: `empty store ${rate(r.plain.eventsPerSec)}`,
      ratio: pct(grownRatio),
      target: '≥ 80%',
      ok: grownRatio >= 0.8,
    });
  }
  return rows;
}

/** The Sources section (bench/sources.mjs): printed, and written into its own part of the page. */
async function sources(sim, roundTripMs, machine) {
  const measured = await measureSources(sim, sourcesSizes(scale), roundTripMs, log);
  const section = sourcesSection(measured, machineLine(machine));
  console.log(`\n${section}\n`);
  if (writePage) writeBlock(PAGE, 'sources', section);
  return measured;
}

function machineLine(m) {
  return `Machine: ${m.cpu}, ${m.memory}; Node ${m.node}; ${m.postgres}; ${m.redis}; load at start ${m.loadAtStart}`;
}

function stripSamples(r) {
  return JSON.parse(
    JSON.stringify(r, (key, value) => (key === 'samples' || key === 'env' ? undefined : value)),
  );
}

let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    console.error(`\n${signal}: cleaning up`);
    cleanUp().finally(() => process.exit(130));
  });
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
