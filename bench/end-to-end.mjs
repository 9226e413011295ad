import { benchPrefix, deletePrefix, dropSchema } from './lib/env.mjs';
import { migratedStore } from './lib/store.mjs';
import { runWorker, workerEnv } from './lib/worker.mjs';

/** A fresh migrated schema for one run; `prepare(store)` may fill it first. Returns its name. */
export async function prepareSchema(label, prepare) {
  const store = await migratedStore(label);
  try {
    if (prepare) await prepare(store);
  } finally {
    await store.close();
  }
  return store.schema;
}

/**
 * One real `feedsync sync --once` process over a fresh synthetic backlog of
 * `events`, in a schema of its own (made here unless `schema` is given). The rate
 * is events over the run's own duration (from its summary line: schema check,
 * lock, catch-up and outbox drain); process start-up is measured apart, as cold
 * start. `env` adds variables to the run's environment.
 */
export async function syncOnce(
  sim,
  {
    label,
    events,
    latencyMs = 0,
    schema,
    keep = false,
    nodeArgs,
    cpu = null,
    cli,
    env: extraEnv = {},
    cgroup = null,
  },
) {
  const env = {
    ...workerEnv({
      schema: schema ?? (await prepareSchema(label)),
      prefix: benchPrefix(label),
      baseUrl: sim.baseUrl,
    }),
    ...extraEnv,
  };
  await sim.setLatency(0);
  await sim.setBacklog(events);
  await sim.setLatency(latencyMs);
  const run = await runWorker(env, {
    cpu,
    cgroup,
    ...(nodeArgs ? { nodeArgs } : {}),
    ...(cli ? { cli } : {}),
  });
  const s = run.summary;
  if (s?.status !== 'caught-up' || s.events_stored !== events || s.jobs_published !== events) {
    throw new Error(`${label}: the run did not store and publish ${events} events: ${JSON.stringify(s)}`);
  }
  const result = {
    label,
    events,
    latencyMs,
    runMs: s.durationMs,
    wallMs: run.wallMs,
    eventsPerSec: events / (s.durationMs / 1000),
    peakRssMb: run.peakRssMb,
    samples: run.samples,
    cpu: run.cpu,
    env,
  };
  if (!keep) await release(result);
  return result;
}

/** Drops the schema and queue keys of a run that was kept. */
export async function release(result) {
  await dropSchema(result.env.DATABASE_SCHEMA);
  await deletePrefix(result.env.QUEUE_PREFIX);
}

/**
 * `sync --once` against a feed that is caught up: process start to exit, `runs` times,
 * with this build or `cli`. Memory is sampled every `sampleMs` (the default samples
 * none: a run is over before the first).
 */
export async function coldStart(env, runs, { cli, sampleMs = 1000 } = {}) {
  const times = [];
  const peakRssMb = [];
  for (let i = 0; i < runs; i++) {
    const run = await runWorker(env, { sampleMs, ...(cli ? { cli } : {}) });
    if (run.summary?.events_stored !== 0) throw new Error('cold start: the feed was not caught up');
    times.push(run.wallMs);
    peakRssMb.push(run.peakRssMb);
  }
  return { medianMs: median(times), times, peakRssMb };
}

export function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/** Peak RSS over the first and the second half of a run's samples: flat when close. */
export function rssHalves(samples) {
  const end = samples.at(-1)?.t ?? 0;
  const peak = (list) => list.reduce((m, x) => Math.max(m, x.rss), 0) / 1024;
  return {
    firstMb: peak(samples.filter((x) => x.t <= end / 2)),
    secondMb: peak(samples.filter((x) => x.t > end / 2)),
  };
}
