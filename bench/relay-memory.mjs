// Peak RSS of a real `sync --once` whose events reach the relay (a routed type, so every
// event becomes an outbox row and a job), with events of 40 kB and 200 kB, Redis answering
// or frozen (SIGSTOP) for a while mid-run, each run three times side by side: as plain
// `node dist/bin/feedsync.js` (no node flag, as `npm run demo` and every package.json script
// run it) on this machine, with Node's defaults inside a memory cgroup of the manifests'
// limit (as in a pod: Node sizes V8's heap from it), and through the image's node flags
// (Dockerfile ENTRYPOINT). Then a catch-up of 100,000 small events, the same three ways. Against the smallest memory limit of the
// manifests; the small catch-up against 150 MB with plain node.
// Run alone: `node bench/run.mjs --only relay-memory`.
import pg from 'pg';
import { prepareSchema, syncOnce } from './end-to-end.mjs';
import { DATABASE_URL, dropSchema, IMAGE_NODE_FLAGS } from './lib/env.mjs';
import { createMemoryCgroup } from './lib/memory-cgroup.mjs';
import { startPaddedFeed } from './lib/padded-feed.mjs';
import { startPrivateRedis } from './lib/redis-server.mjs';
import { startSimChild } from './lib/simulator.mjs';
import { runWorker, workerEnv } from './lib/worker.mjs';
import { manifestMemoryLimitMb } from './page-memory.mjs';

/** How long Redis stays frozen in a frozen run: longer than a publish's deadline (10 s). */
const FROZEN_MS = 20_000;
/** The small catch-up's target with plain node (issue: at most 150 MB). */
const SMALL_TARGET_MB = 150;
const MiB = 1024 * 1024;
/** Peak RSS is read in kB (KiB) from /proc: shown in MiB, as the manifests' limits are written. */
const mib = (x) => `${Math.round(x)} MiB`;
/**
 * Plain `node dist/bin/feedsync.js` on this machine as it is (V8 sizes its heap from the
 * whole machine's memory; the bin sets --heap-growing-percent=50 itself); Node's defaults
 * inside a memory cgroup of the manifests' limit, as in a pod (Node sizes the heap from
 * the limit; `--heap-growing-percent=0` is V8's own default, given so that the bin leaves
 * it: what a process that embeds feedsync gets); then through the image's node flags.
 */
const RUNNERS = [
  { name: 'plain node', nodeArgs: [] },
  {
    name: "Node's defaults in a memory cgroup of the manifests' limit, as in a pod",
    nodeArgs: ['--heap-growing-percent=0'],
    pod: true,
  },
  { name: "the image's flags", nodeArgs: IMAGE_NODE_FLAGS },
];
const labelOf = (runner) => (runner.pod ? 'p' : runner.nodeArgs.length === 0 ? 'n' : 'i');

/** The runner's memory cgroup, for the pod runner; an error where none can be made. */
function cgroupFor(runner) {
  if (!runner.pod) return null;
  const cgroup = createMemoryCgroup(manifestMemoryLimitMb() * 1e6);
  if (!cgroup) throw new Error('relay-memory: no writable memory cgroup on this machine (it needs root)');
  return cgroup;
}

/**
 * The cases: events of 40 kB in pages of 100 (4 MB pages), of 200 kB in pages of 35
 * (7 MB, under the default 8 MiB response limit); about 160-200 MB of events each.
 */
function cases(scale) {
  const sizes = [
    { eventKb: 40, limit: 100, total: Math.max(400, Math.round(4000 * scale)) },
    { eventKb: 200, limit: 35, total: Math.max(140, Math.round(1000 * scale)) },
  ];
  return sizes.flatMap((s) => [false, true].map((frozen) => ({ ...s, frozen })));
}

/** One run of case `c` by `runner` on a private Redis; frozen runs stop it once a quarter is published. */
export async function relayRun(c, runner, label) {
  const redis = await startPrivateRedis();
  const feed = await startPaddedFeed({
    total: c.total,
    eventBytes: c.eventKb * 1000,
    limit: c.limit,
    type: 'email.delivered',
  });
  const schema = await prepareSchema(label);
  const env = {
    ...workerEnv({ schema, prefix: `bench-${label}`, baseUrl: feed.baseUrl }),
    REDIS_URL: redis.url,
    FEED_PAGE_LIMIT: String(c.limit),
  };
  const monitor = new pg.Client({ connectionString: DATABASE_URL });
  await monitor.connect();
  let frozenFor = 0;
  let stopWatching = false;
  const freezer = async () => {
    if (!c.frozen) return;
    while (!stopWatching) {
      const { rows } = await monitor.query(
        `SELECT count(*)::int AS n FROM "${schema}".outbox WHERE published_at IS NOT NULL`,
      );
      if (rows[0].n >= c.total / 4) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    if (stopWatching) return;
    redis.freeze();
    const at = performance.now();
    await new Promise((resolve) => setTimeout(resolve, FROZEN_MS));
    redis.thaw();
    frozenFor = performance.now() - at;
  };
  try {
    const watching = freezer();
    const cgroup = cgroupFor(runner);
    const run = await runWorker(env, {
      nodeArgs: runner.nodeArgs,
      sampleMs: 25,
      anyExit: c.frozen,
      cgroup,
    }).finally(() => cgroup?.dispose());
    stopWatching = true;
    await watching;
    const stored = run.summary?.events_stored ?? null;
    if (!c.frozen && (run.code !== 0 || stored !== c.total)) {
      throw new Error(`${label}: the run did not store ${c.total} events: ${JSON.stringify(run.summary)}`);
    }
    return { peakRssMb: run.peakRssMb, code: run.code, frozenMs: frozenFor, wallMs: run.wallMs };
  } finally {
    stopWatching = true;
    await monitor.end();
    await feed.close();
    await redis.stop();
    await dropSchema(schema);
  }
}

/** Runs the section. `scale` shrinks the runs (--quick). */
export async function relayMemory({ scale = 1, log = () => {} } = {}) {
  const runs = [];
  for (const c of cases(scale)) {
    const row = { ...c, by: {} };
    for (const runner of RUNNERS) {
      const what = `${c.total} events of ${c.eventKb} kB${c.frozen ? ', Redis frozen' : ''}, ${runner.name}`;
      log(`sync --once, ${what}`);
      const label = `relaymem_${c.eventKb}${c.frozen ? 'f' : ''}_${labelOf(runner)}`;
      row.by[runner.name] = await relayRun(c, runner, label);
    }
    runs.push(row);
  }
  const events = Math.round(100_000 * scale);
  const sim = await startSimChild();
  const small = { events, by: {} };
  try {
    for (const runner of RUNNERS) {
      log(`sync --once, ${events} small events, ${runner.name}`);
      const cgroup = cgroupFor(runner);
      const run = await syncOnce(sim, {
        label: `relaymem_small_${labelOf(runner)}`,
        events,
        nodeArgs: runner.nodeArgs,
        cgroup,
      }).finally(() => cgroup?.dispose());
      small.by[runner.name] = { peakRssMb: run.peakRssMb, eventsPerSec: run.eventsPerSec };
    }
  } finally {
    await sim.stop();
  }
  return { limitMib: (manifestMemoryLimitMb() * 1e6) / MiB, runs, small };
}

/** Table rows (see lib/table.mjs): each case by plain node, then by the image's flags. */
export function relayMemoryRows(r) {
  const rows = [];
  for (const run of r.runs) {
    const what =
      `peak RSS, ${run.total.toLocaleString('en-US')} events of ${run.eventKb} kB reaching the relay` +
      (run.frozen ? `, Redis frozen ${Math.round(FROZEN_MS / 1000)} s mid-run` : '');
    for (const [name, m] of Object.entries(run.by)) {
      rows.push({
        measure: name === 'plain node' ? `${what}, plain node` : `  the same, ${name}`,
        result: mib(m.peakRssMb),
        against: `manifests' limit ${mib(r.limitMib)}${run.frozen ? `; exit ${m.code}` : ''}`,
        ratio: `${Math.round((m.peakRssMb / r.limitMib) * 100)}%`,
        target: '< 100%',
        ok: m.peakRssMb < r.limitMib,
      });
    }
  }
  for (const [name, m] of Object.entries(r.small.by)) {
    // The 150 MB target is for no node flag: plain node, and Node's defaults in the pod.
    const flagless = name !== "the image's flags";
    rows.push({
      measure:
        name === 'plain node'
          ? `peak RSS, ${r.small.events.toLocaleString('en-US')}-event catch-up of small events, plain node`
          : `  the same, ${name}`,
      result: mib(m.peakRssMb),
      against: flagless ? `${SMALL_TARGET_MB} MB (${mib((SMALL_TARGET_MB * 1e6) / MiB)})` : '',
      ratio: flagless ? `${Math.round(((m.peakRssMb * MiB) / (SMALL_TARGET_MB * 1e6)) * 100)}%` : '',
      target: flagless ? `≤ ${SMALL_TARGET_MB} MB` : '',
      ok: flagless ? m.peakRssMb * MiB <= SMALL_TARGET_MB * 1e6 : null,
    });
  }
  return rows;
}
