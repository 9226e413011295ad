// The hand-off of a page's jobs with the queues in the events' database, side by side in
// one run: (A) the page's transaction, then the outbox relay publishing through the
// Postgres publisher until drained, as sync does today; (B) the same page's transaction
// adding its jobs itself, through BullMQ's own add_jobs_bulk, with no outbox row and no
// relay. Both with one page a transaction (a source caught up) and ten (a catch-up's
// loads, HELD_PAGES_DEFAULTS.maxPerCommit). `node bench/run.mjs --only page-handoff`
// (after `npm run build`).
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { createPostgresBackend, Job, LATEST_SCHEMA_VERSION, Queue } from 'bullmq';
import pg from 'pg';
import { createLogger } from '../dist/logger.js';
import { jobData } from '../dist/queue/job-data.js';
import { createPgPublisher } from '../dist/queue/pg-publisher.js';
import { migrateQueues } from '../dist/queue/pg-queues.js';
import { bulkJobsOf } from '../dist/queue/queue-session.js';
import { startRelay } from '../dist/queue/relay-loop.js';
import { jobIdFor, jobOptionsFor } from '../dist/queue/routes.js';
import { createApplier } from '../dist/store/applier.js';
import { ensureCursor } from '../dist/store/cursor.js';
import { createStore } from '../dist/store/db.js';
import { pgOutbox } from '../dist/store/outbox.js';
import { backendMeter } from './lib/cpu.mjs';
import { benchSchema, DATABASE_URL, dropSchema, SOURCE } from './lib/env.mjs';
import { backlogEvents, defaultQueues, migratedStore, route } from './lib/store.mjs';
import { pct } from './lib/table.mjs';

/** Rounds of both paths, alternating A B A B; medians reported (a shared machine is noisy). */
const ROUNDS = 3;
/** FEED_PAGE_LIMIT's default. */
const PAGE = 100;
/** Pages a transaction: one as a source caught up commits them, ten as a catch-up does. */
const SHAPES = [1, 10];
const PATHS = ['relay', 'transaction'];
/** The decision rule: B is kept only at this many times A's events/s, and with less CPU per event. */
const FASTER = 1.2;
/** The BullMQ function B calls, in the queues' schema (node_modules/bullmq/dist/esm/postgres/sql-scripts.js). */
const ADD_JOBS = 'add_jobs_bulk';
/** Jobs a call of add_jobs_bulk alone: a page's, and a load of ten pages' (the publisher sends at most 500 a call). */
const CALL_SIZES = [100, 1000];

/** CPU time of this process in ms, from /proc/self/schedstat (nanoseconds; /stat counts 10 ms ticks). */
function selfCpuMs() {
  return Number(readFileSync('/proc/self/schedstat', 'utf8').split(' ')[0]) / 1e6;
}

export async function pageHandoff({ events, log }) {
  const all = backlogEvents(1, events, Date.UTC(2024, 0, 1));
  const monitor = new pg.Client({ connectionString: DATABASE_URL });
  await monitor.connect();
  const runs = Object.fromEntries(SHAPES.map((n) => [n, { relay: [], transaction: [] }]));
  const firstJob = {};
  let perCall;
  try {
    for (const perCommit of SHAPES) {
      const loads = loadsOf(all, perCommit);
      for (let round = 0; round < ROUNDS; round++) {
        for (const path of PATHS) {
          log(
            `page hand-off: ${events} events, ${perCommit} page(s) of ${PAGE} a transaction, ${path} (round ${round + 1} of ${ROUNDS})`,
          );
          const run = await once(path, `${perCommit}_${round}`, loads, monitor);
          runs[perCommit][path].push(run);
          firstJob[path] ??= run.firstJob;
        }
      }
    }
    log(`page hand-off: ${ADD_JOBS} alone, ${CALL_SIZES.join(' and ')} jobs a call`);
    perCall = await addJobsAlone(all);
  } finally {
    await monitor.end();
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const summary = (list) => ({
    eventsPerSec: median(list.map((r) => r.eventsPerSec)),
    bench: median(list.map((r) => r.benchUs)),
    postgres: median(list.map((r) => r.postgresUs)),
    total: median(list.map((r) => r.benchUs + r.postgresUs)),
    runs: list.map((r) => Math.round(r.eventsPerSec)),
  });
  return {
    events,
    rounds: ROUNDS,
    shapes: SHAPES.map((perCommit) => ({
      perCommit,
      relay: summary(runs[perCommit].relay),
      transaction: summary(runs[perCommit].transaction),
    })),
    perCall,
    sameJobs: JSON.stringify(firstJob.relay) === JSON.stringify(firstJob.transaction),
    schemaVersion: LATEST_SCHEMA_VERSION,
    loadAtEnd: loadavg()
      .map((x) => x.toFixed(2))
      .join(' '),
  };
}

/** The events as sync hands them to the applier: `perCommit` pages a batch, with where each page starts. */
function loadsOf(all, perCommit) {
  const loads = [];
  for (let i = 0; i < all.length; i += PAGE * perCommit) {
    const events = all.slice(i, i + PAGE * perCommit);
    const pageStarts = [];
    for (let p = 0; p < events.length; p += PAGE) pageStarts.push(p);
    loads.push({ events, pageStarts });
  }
  return loads;
}

/** One path over every load, in schemas of its own: events/s, and µs of CPU per event of this process and of its Postgres backends. */
async function once(path, round, loads, monitor) {
  const events = loads.reduce((n, l) => n + l.events.length, 0);
  // The schemas are made, migrated and the cursor created on connections closed before the clock starts.
  const made = await migratedStore(`ph_${path}_${round}`);
  const schema = made.schema;
  await ensureCursor(made, SOURCE, null);
  await made.close();
  const queues = { url: DATABASE_URL, schema: benchSchema(`ph_q_${path}_${round}`) };
  await migrateQueues(queues, 10_000);

  const store = createStore({ url: DATABASE_URL, schema });
  const meter = backendMeter(monitor, process.pid);
  const sampling = setInterval(() => void meter.sample(), 100);
  const cpuStart = selfCpuMs();
  const started = performance.now();
  const stop =
    path === 'relay' ? await viaRelay(store, queues, loads) : await inTransaction(store, queues, loads);
  const seconds = (performance.now() - started) / 1000;
  const benchMs = selfCpuMs() - cpuStart;
  clearInterval(sampling);
  await meter.sample();
  const postgresMs = meter.totalMs();
  await stop();
  await store.close();

  const q = `"${queues.schema}"`;
  const count = async (sql) => Number((await monitor.query(sql)).rows[0].n);
  const jobs = await count(`SELECT count(*) AS n FROM ${q}.job`);
  const stored = await count(`SELECT count(*) AS n FROM "${schema}".events`);
  const open = await count(`SELECT count(*) AS n FROM "${schema}".outbox WHERE published_at IS NULL`);
  if (jobs !== events || stored !== events || open !== 0) {
    throw new Error(
      `${path}: ${stored} events stored, ${jobs} jobs, ${open} outbox rows unpublished (of ${events})`,
    );
  }
  // The first job as BullMQ stored it, but for when it was added: the two paths must write the same.
  const { rows } = await monitor.query(
    `SELECT queue, id, name, state, data, opts, priority, max_attempts FROM ${q}.job ORDER BY seq LIMIT 1`,
  );
  await dropSchema(schema);
  await dropSchema(queues.schema);
  return {
    eventsPerSec: events / seconds,
    benchUs: (benchMs * 1000) / events,
    postgresUs: (postgresMs * 1000) / events,
    firstJob: rows[0],
  };
}

/** Applies one page as sync does (the cursor's compare-and-set from `prev` to `next`); throws unless applied. */
async function applyPage(applier, path, { events, pageStarts, prev, next }) {
  const result = await applier.apply({
    source: SOURCE,
    receivedVia: 'feed',
    events,
    quarantine: [],
    cursor: { prev, next },
    pageStarts,
  });
  if (result.status !== 'applied') throw new Error(`${path}: a page was not applied (${result.status})`);
  return result;
}

/** (A) Today's path, as sync applies a page: wait for the relay's room, commit, offer the outbox rows; then drain. */
async function viaRelay(store, queues, loads) {
  const publisher = createPgPublisher({ queues, jobOptions: jobOptionsFor(defaultQueues) });
  const relay = startRelay({ outbox: pgOutbox(store), publisher, logger: createLogger({ level: 'silent' }) });
  const applier = createApplier(store, route);
  let prev = null;
  for (const { events, pageStarts } of loads) {
    const next = events[events.length - 1].id;
    await relay.ready();
    const result = await applyPage(applier, 'relay', { events, pageStarts, prev, next });
    relay.offer(result.outbox);
    prev = next;
  }
  await relay.drain();
  return async () => {
    await relay.stop();
    await publisher.close();
  };
}

/**
 * (B) The page's transaction adds its jobs: the apply statement with no route (no outbox
 * row), then BullMQ's add_jobs_bulk per queue with the entries BullMQ's Queue.addBulk
 * builds (the publisher's job options and job ids, Job's JSON, the backend's batch entry),
 * then COMMIT.
 */
async function inTransaction(store, queues, loads) {
  // The publisher's queues' defaultJobOptions: cloned once, merged into each job as Queue.addBulk does.
  const jobOptions = structuredClone(jobOptionsFor(defaultQueues));
  // Queues made only for BullMQ's own Job and batch-entry code: no job goes through them, and
  // the one idle connection each opens counts against B.
  const builders = new Map();
  const builderOf = (name) => {
    let queue = builders.get(name);
    if (!queue) {
      queue = new Queue(
        name,
        { connection: { connectionString: DATABASE_URL, schema: queues.schema, max: 1 } },
        createPostgresBackend,
      );
      queue.on('error', () => {});
      builders.set(name, queue);
    }
    return queue;
  };
  let client = null;
  // The applier's statement runs on the page's transaction: the same text and values as A's.
  const inTx = {
    schema: store.schema,
    get pool() {
      return client;
    },
  };
  const applier = createApplier(inTx, () => null);
  const addJobs = `SELECT id FROM "${queues.schema}".${ADD_JOBS}($1, $2::jsonb) AS t(id)`;
  let prev = null;
  for (const { events, pageStarts } of loads) {
    const next = events[events.length - 1].id;
    client = await store.pool.connect();
    try {
      await client.query('BEGIN');
      const result = await applyPage(applier, 'transaction', { events, pageStarts, prev, next });
      for (const [name, jobs] of jobsByQueue(result.inserted)) {
        await client.query(addJobs, [name, JSON.stringify(batchEntries(builderOf(name), jobs, jobOptions))]);
      }
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
      client = null;
    }
    prev = next;
  }
  return async () => {
    await Promise.all([...builders.values()].map((q) => q.close()));
  };
}

/**
 * add_jobs_bulk alone on one connection, entries built beforehand: ms of wall time a call
 * and µs a job at each of CALL_SIZES, twice alternating, each round into queues of its own.
 */
async function addJobsAlone(all) {
  const queues = { url: DATABASE_URL, schema: benchSchema('ph_q_alone') };
  await migrateQueues(queues, 10_000);
  const jobOptions = structuredClone(jobOptionsFor(defaultQueues));
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  const sums = new Map(CALL_SIZES.map((n) => [n, { ms: 0, calls: 0, jobs: 0 }]));
  try {
    for (let round = 0; round < 2; round++) {
      for (const size of CALL_SIZES) {
        const name = `alone-${size}-${round}`;
        const builder = new Queue(
          name,
          { connection: { connectionString: DATABASE_URL, schema: queues.schema, max: 1 } },
          createPostgresBackend,
        );
        builder.on('error', () => {});
        const calls = [];
        for (let i = 0; i < all.length; i += size) {
          const jobs = [...jobsByQueue(all.slice(i, i + size)).values()].flat();
          calls.push(JSON.stringify(batchEntries(builder, jobs, jobOptions)));
        }
        await builder.close();
        const sum = sums.get(size);
        for (const entries of calls) {
          const started = performance.now();
          await client.query(`SELECT id FROM "${queues.schema}".${ADD_JOBS}($1, $2::jsonb) AS t(id)`, [
            name,
            entries,
          ]);
          sum.ms += performance.now() - started;
        }
        sum.calls += calls.length;
        sum.jobs += all.length;
      }
    }
  } finally {
    await client.end();
    await dropSchema(queues.schema);
  }
  return CALL_SIZES.map((size) => {
    const { ms, calls, jobs } = sums.get(size);
    return { size, msPerCall: ms / calls, usPerJob: (ms * 1000) / jobs };
  });
}

/** The relay's jobs for events just stored (relay.ts publishOffered), grouped by queue in feed order. */
function jobsByQueue(inserted) {
  const byQueue = new Map();
  for (const event of inserted) {
    const r = route(event.type);
    if (!r) continue;
    const list = byQueue.get(r.queue) ?? [];
    byQueue.set(r.queue, list);
    list.push({ name: r.jobName, jobId: jobIdFor(SOURCE, event.id), data: jobData(SOURCE, event) });
  }
  return byQueue;
}

/**
 * What Queue.addBulk hands add_jobs_bulk for these jobs: the publisher's bulk jobs
 * (bulkJobsOf) over its default options, as Job instances, then the backend's batch entry.
 */
function batchEntries(queue, jobs, jobOptions) {
  return bulkJobsOf(jobs).map((bulk) => {
    const opts = { ...jobOptions, ...bulk.opts, jobId: bulk.opts.jobId, telemetry: undefined };
    const job = new Job(queue, bulk.name, bulk.data, opts, opts.jobId);
    const json = job.asJSON();
    job.validateOptions(json);
    return queue.backend.toBatchEntry(queue.name, json, job.id, { parentKey: job.parentKey });
  });
}

/** The section alone: 20,000 events a run at scale 1. */
export function pageHandoffAlone({ scale, log }) {
  return pageHandoff({ events: Math.round(20_000 * scale), log });
}

const perSec = (x) => `${Math.round(x).toLocaleString('en-US')} events/s`;
const us = (s) => `${s.bench.toFixed(0)} / ${s.postgres.toFixed(0)} / ${s.total.toFixed(0)} µs`;

export function pageHandoffRows(r) {
  const rows = [];
  const verdicts = [];
  for (const { perCommit, relay: a, transaction: b } of r.shapes) {
    const ratio = b.eventsPerSec / a.eventsPerSec;
    verdicts.push(ratio >= FASTER && b.total < a.total);
    const shape =
      perCommit === 1 ? `one page of ${PAGE} a transaction` : `${perCommit} pages of ${PAGE} a transaction`;
    rows.push(
      {
        measure: `(A) ${shape}, then the relay to Postgres queues until drained (${r.events.toLocaleString('en-US')} events, median of ${r.rounds})`,
        result: perSec(a.eventsPerSec),
      },
      {
        measure: `  (B) the same transaction adds its jobs (${ADD_JOBS}): no outbox row, no relay`,
        result: perSec(b.eventsPerSec),
        against: 'A',
        ratio: `${ratio.toFixed(2)}×`,
      },
      { measure: '  CPU per event, A: bench process / Postgres backends / both', result: us(a) },
      {
        measure: '  CPU per event, B: bench process / Postgres backends / both',
        result: us(b),
        against: 'A (both)',
        ratio: pct(b.total / a.total),
      },
      {
        measure: '  every round, A / B (events/s)',
        result: a.runs.map((x, i) => `${x}/${b.runs[i]}`).join(' '),
      },
    );
  }
  rows.push(
    {
      measure: `${ADD_JOBS} alone, one connection, wall time (${r.perCall.map((c) => `${c.size}`).join(' / ')} jobs a call)`,
      result: r.perCall
        .map((c) => `${c.msPerCall.toFixed(1)} ms (${c.usPerJob.toFixed(0)} µs a job)`)
        .join(' / '),
    },
    {
      measure: `the first job as stored, A and B (BullMQ schema version ${r.schemaVersion})`,
      result: r.sameJobs ? 'the same' : 'different',
    },
    {
      measure: `decision: B only at ≥ ${FASTER}× A's events/s with less CPU per event, in both shapes (load at end ${r.loadAtEnd})`,
      result: verdicts.every(Boolean) ? 'B is clearly faster' : 'the relay stays',
    },
  );
  return rows;
}
