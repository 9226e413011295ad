import { createLogger } from '../dist/logger.js';
import { createStore } from '../dist/store/db.js';
import { pruneExpired } from '../dist/store/retention.js';
import { prepareSchema } from './end-to-end.mjs';
import { fillStore } from './growth.mjs';
import { benchPrefix, DATABASE_URL, SOURCE } from './lib/env.mjs';
import { startSimChild } from './lib/simulator.mjs';
import { pct, rate } from './lib/table.mjs';
import { runWorker, workerEnv } from './lib/worker.mjs';

/** The fill's events are from 2020: a year's retention lets every one of them go, and none of the feed's. */
const RETENTION_DAYS = 365;

/**
 * EVENTS_RETENTION_DAYS under load: a schema holding `stored` old events, then two
 * `sync --once` catch-ups of `events` each into it, under sources of their own so
 * that both store every event: the first alone, the second while the old events are
 * pruned with the run's own settings (1000 rows a statement, resting as long as each batch
 * took, calls of at most 5 s back to back, as consecutive runs would). Also the disk
 * a stored event takes, tables and indexes, measured on the filled schema.
 */
export async function retentionUnderLoad(sim, { stored, events }) {
  const schema = await prepareSchema('retention', (store) => fillStore(store, stored));
  const store = createStore({ url: DATABASE_URL, schema, logger: createLogger({ level: 'silent' }) });
  try {
    const disk = await bytesPerRow(store);
    await sim.setLatency(0);
    await sim.setBacklog(events);
    const alone = await catchUp(sim, schema, 'alone', events);

    await sim.setBacklog(events);
    const pruning = pruneAll(store);
    const started = performance.now();
    const during = await catchUp(sim, schema, 'pruning', events);
    // Counted in the table: the pruner's own count moves only when a 5 s call returns.
    const prunedDuringRun = stored - (await oldLeft(store));
    const pruned = await pruning.finished;
    return {
      stored,
      events,
      alone,
      during,
      ratio: during.eventsPerSec / alone.eventsPerSec,
      prunedDuringRun,
      pruned: pruned.deleted,
      pruneSeconds: pruned.seconds,
      pruneStartToRunEnd: (performance.now() - started) / 1000,
      disk,
      left: await oldLeft(store),
    };
  } finally {
    await store.close();
  }
}

/** The fill's events still stored. */
async function oldLeft(store) {
  const { rows } = await store.pool.query(
    `SELECT count(*) AS n FROM "${store.schema}".events WHERE source = $1`,
    [SOURCE],
  );
  return Number(rows[0].n);
}

/** One real `sync --once` of the simulator's backlog under its own FEED_SOURCE. */
async function catchUp(sim, schema, label, events) {
  const env = {
    ...workerEnv({ schema, prefix: benchPrefix(`retention-${label}`), baseUrl: sim.baseUrl }),
    FEED_SOURCE: label,
  };
  const run = await runWorker(env);
  const s = run.summary;
  if (s?.status !== 'caught-up' || s.events_stored !== events) {
    throw new Error(`retention ${label}: the run did not store ${events} events: ${JSON.stringify(s)}`);
  }
  return { runMs: s.durationMs, eventsPerSec: events / (s.durationMs / 1000) };
}

/** Prunes the fill's source until nothing old is left, call after call. */
function pruneAll(store) {
  let deleted = 0;
  const started = performance.now();
  const finished = (async () => {
    for (;;) {
      const result = await pruneExpired(store, { days: RETENTION_DAYS, outboxHours: 168 });
      deleted += result.events;
      if (result.done) return { deleted, seconds: (performance.now() - started) / 1000 };
    }
  })();
  return { finished };
}

/** pg_total_relation_size (heap, TOAST and every index) per row of each table, after the fill's VACUUM. */
async function bytesPerRow(store) {
  const out = {};
  for (const table of ['events', 'email_status', 'outbox']) {
    const { rows } = await store.pool.query(
      `SELECT pg_total_relation_size($1::regclass) AS bytes, (SELECT count(*) FROM "${store.schema}".${table}) AS n`,
      [`"${store.schema}".${table}`],
    );
    out[table] = {
      bytes: Number(rows[0].bytes),
      rows: Number(rows[0].n),
      perRow: Number(rows[0].bytes) / Number(rows[0].n),
    };
  }
  return out;
}

/** The section alone: its own simulator; 5,000,000 old events and catch-ups of 200,000 at scale 1. */
export async function retentionAlone({ scale, log }) {
  const stored = Math.round(5_000_000 * scale);
  const events = Math.round(200_000 * scale);
  log(`retention: ${stored} old events, two catch-ups of ${events}, the second while pruning`);
  const sim = await startSimChild();
  try {
    return await retentionUnderLoad(sim, { stored, events });
  } finally {
    await sim.stop();
  }
}

const n = (x) => x.toLocaleString('en-US');

/** The rows of the retention table, the disk a stored row takes last. */
export function retentionRows(r) {
  const { events, email_status: status, outbox } = r.disk;
  return [
    {
      measure: `sync --once, ${n(r.events)} events, ${n(r.stored)} old events stored`,
      result: rate(r.alone.eventsPerSec),
    },
    {
      measure: `  the same while EVENTS_RETENTION_DAYS prunes the ${n(r.stored)}`,
      result: rate(r.during.eventsPerSec),
      against: `${n(r.prunedDuringRun)} rows pruned during the run`,
      ratio: pct(r.ratio),
      target: '≥ 80%',
      ok: r.ratio >= 0.8,
    },
    {
      measure: `pruning all ${n(r.stored)} old events (1000 a statement, resting as long)`,
      result: `${n(Math.round(r.pruned / r.pruneSeconds))} rows/s`,
      against: `${Math.round(r.pruneSeconds)} s in all; ${n(r.left)} old left`,
    },
    {
      measure: 'disk per stored row (pg_total_relation_size, indexes included)',
      result: `events ${Math.round(events.perRow)} B`,
      against: `email_status ${Math.round(status.perRow)} B, outbox ${Math.round(outbox.perRow)} B`,
    },
  ];
}
