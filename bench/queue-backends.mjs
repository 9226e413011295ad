import { createPostgresBackend, Queue } from 'bullmq';
import pg from 'pg';
import { CONSUMER_DEFAULTS } from '../dist/consumer/defaults.js';
import { createConsumer } from '../dist/consumer/index.js';
import { createLogger } from '../dist/logger.js';
import { migrateQueues } from '../dist/queue/pg-queues.js';
import { fillQueue } from './consumer.mjs';
import { syncOnce } from './end-to-end.mjs';
import { commitRate } from './lib/commit-rate.mjs';
import { backendMeter, cpuMs } from './lib/cpu.mjs';
import { benchSchema, DATABASE_URL, dropSchema, REDIS_URL, withPg } from './lib/env.mjs';
import { redisPid } from './lib/machine.mjs';
import { startSimChild } from './lib/simulator.mjs';
import { pct } from './lib/table.mjs';

/** Rounds of both backends, alternating; medians reported (a shared machine is noisy). */
const ROUNDS = 3;
const QUEUE = 'email-events';
const BACKENDS = ['redis', 'postgres'];
/** The consumer's concurrencies measured: the default was 4 until these figures. */
const CONCURRENCIES = [4, 8, 16, 32];
const DEFAULT = CONSUMER_DEFAULTS.concurrency;

/**
 * The two homes of the queues side by side, in one run: `sync --once` end to end (the
 * CLI, the simulator, the outbox relay publishing every job) with the queues in Redis and
 * in Postgres (QUEUE_BACKEND=postgres, BullMQ's backend, the same database as the events),
 * then createConsumer at each of CONCURRENCIES taking the same jobs from each, and after
 * each pair the bare commit rate of this Postgres with as many clients for as long: the
 * ceiling of a consumer that commits one transaction per job.
 */
export async function queueBackends({ events, jobs, log }) {
  const sim = await startSimChild();
  const monitor = new pg.Client({ connectionString: DATABASE_URL });
  await monitor.connect();
  const cpu = { pg: monitor, redisPid: await redisPid(), simPid: sim.pid };
  const sync = { redis: [], postgres: [] };
  const consumer = Object.fromEntries(
    BACKENDS.map((b) => [b, Object.fromEntries(CONCURRENCIES.map((c) => [c, []]))]),
  );
  const ceiling = Object.fromEntries(CONCURRENCIES.map((c) => [c, []]));
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const backend of BACKENDS) {
        log(`queue backends: sync --once, ${events} events, ${backend} (round ${round + 1} of ${ROUNDS})`);
        const schema = backend === 'postgres' ? await queueSchema(`qb_sync_${round}`) : null;
        const env = schema
          ? { QUEUE_BACKEND: 'postgres', QUEUE_DATABASE_URL: DATABASE_URL, QUEUE_PREFIX: schema }
          : {};
        const run = await syncOnce(sim, { label: `qb_${backend}_${round}`, events, cpu, env });
        sync[backend].push({
          eventsPerSec: run.eventsPerSec,
          peakRssMb: run.peakRssMb,
          cpuUs: perEvent(run.cpu, events),
        });
        if (schema) await dropSchema(schema);
      }
      for (const concurrency of CONCURRENCIES) {
        let seconds = 0;
        for (const backend of BACKENDS) {
          log(
            `queue backends: createConsumer, concurrency ${concurrency}, ${jobs} jobs, ${backend} (round ${round + 1} of ${ROUNDS})`,
          );
          const run = await consume(backend, jobs, round, concurrency, cpu, monitor);
          consumer[backend][concurrency].push(run);
          seconds += run.seconds / BACKENDS.length;
        }
        log(`queue backends: bare commit rate, ${concurrency} clients, ${seconds.toFixed(1)} s`);
        ceiling[concurrency].push(
          await commitRate({ clients: concurrency, ms: seconds * 1000, label: `qb_${concurrency}_${round}` }),
        );
      }
    }
  } finally {
    await monitor.end();
    await sim.stop();
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const summary = (runs, pick) => median(runs.map(pick));
  return {
    events,
    jobs,
    rounds: ROUNDS,
    sync: Object.fromEntries(
      BACKENDS.map((b) => [
        b,
        {
          eventsPerSec: summary(sync[b], (r) => r.eventsPerSec),
          peakRssMb: summary(sync[b], (r) => r.peakRssMb),
          worker: summary(sync[b], (r) => r.cpuUs.worker),
          postgres: summary(sync[b], (r) => r.cpuUs.postgres),
          redis: summary(sync[b], (r) => r.cpuUs.redis),
          runs: sync[b].map((r) => Math.round(r.eventsPerSec)),
        },
      ]),
    ),
    concurrencies: CONCURRENCIES,
    consumer: Object.fromEntries(
      BACKENDS.map((b) => [
        b,
        Object.fromEntries(
          CONCURRENCIES.map((c) => {
            const runs = consumer[b][c];
            return [
              c,
              {
                jobsPerSec: summary(runs, (r) => r.jobsPerSec),
                node: summary(runs, (r) => r.cpuUs.node),
                postgres: summary(runs, (r) => r.cpuUs.postgres),
                redis: summary(runs, (r) => r.cpuUs.redis),
                runs: runs.map((r) => Math.round(r.jobsPerSec)),
              },
            ];
          }),
        ),
      ]),
    ),
    ceiling: Object.fromEntries(
      CONCURRENCIES.map((c) => [c, { commitsPerSec: median(ceiling[c]), runs: ceiling[c].map(Math.round) }]),
    ),
  };
}

/** µs of CPU per event of the worker, the Postgres backends and Redis. */
function perEvent(c, events) {
  const per = (ms) => (ms == null ? 0 : (ms * 1000) / events);
  return { worker: per(c?.worker), postgres: per(c?.postgres), redis: per(c?.redis) };
}

/** A queues' schema of this run's own, migrated. */
async function queueSchema(label) {
  const schema = benchSchema(label);
  await migrateQueues({ url: DATABASE_URL, schema }, 10_000);
  return schema;
}

/** A Queue on the backend, in `where` (a Redis prefix, or a queues' schema). */
function queueOn(backend, where) {
  return backend === 'postgres'
    ? new Queue(
        QUEUE,
        { connection: { connectionString: DATABASE_URL, schema: where, max: 2 } },
        createPostgresBackend,
      )
    : new Queue(QUEUE, { connection: { url: REDIS_URL }, prefix: where });
}

/**
 * createConsumer at `concurrency` over `jobs` email.delivered jobs, one INSERT each: jobs/s,
 * seconds, and µs of CPU per job of this process (the consumer, and the Queue polling its
 * count), its Postgres backends (the inbox's pool, and on Postgres the queues') and Redis.
 */
async function consume(backend, jobs, round, concurrency, cpu, monitor) {
  const where =
    backend === 'postgres'
      ? await queueSchema(`qb_consumer_${concurrency}_${round}`)
      : `bench-qb-consumer-${concurrency}-${round}-${process.pid}`;
  const app = benchSchema(`qb_app_${backend}_${concurrency}_${round}`);
  await withPg((c) =>
    c.query(`CREATE SCHEMA "${app}"; CREATE TABLE "${app}".effects (source text, event_id text)`),
  );
  const queue = queueOn(backend, where);
  // As CONSUMER.md sizes it: a client per job in flight, and two to spare.
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: concurrency + 2 });
  try {
    await fillQueue(queue, jobs);
    const env =
      backend === 'postgres'
        ? { QUEUE_BACKEND: 'postgres', QUEUE_DATABASE_URL: DATABASE_URL, QUEUE_PREFIX: where }
        : { REDIS_URL, QUEUE_PREFIX: where };
    const statement = `INSERT INTO "${app}".effects (source, event_id) VALUES ($1, $2)`;
    const c = createConsumer({
      name: 'bench',
      pool,
      concurrency,
      schema: app,
      handlers: { 'email.delivered': (e, db) => db.query(statement, [e.source, e.id]) },
      env,
      logger: createLogger({ level: 'silent' }),
    });
    await c.migrate();
    const meter = backendMeter(monitor, process.pid);
    await meter.sample();
    const before = { node: process.cpuUsage(), postgres: meter.totalMs(), redis: cpuMs(cpu.redisPid) };
    const started = performance.now();
    const running = c.run();
    try {
      for (;;) {
        if ((await queue.getCompletedCount()) >= jobs) break;
        await meter.sample();
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const seconds = (performance.now() - started) / 1000;
      await meter.sample();
      const node = process.cpuUsage(before.node);
      const perJob = (ms) => (ms * 1000) / jobs;
      return {
        jobsPerSec: jobs / seconds,
        seconds,
        cpuUs: {
          node: (node.user + node.system) / jobs,
          postgres: perJob(meter.totalMs() - before.postgres),
          redis: perJob((cpuMs(cpu.redisPid) ?? 0) - (before.redis ?? 0)),
        },
      };
    } finally {
      await c.close();
      await running;
    }
  } finally {
    if (backend === 'redis') await queue.obliterate({ force: true });
    await queue.close();
    await pool.end();
    await dropSchema(app);
    if (backend === 'postgres') await dropSchema(where);
  }
}

/** The section alone: 50,000 events end to end and 5,000 jobs a run at scale 1. */
export function queueBackendsAlone({ scale, log }) {
  return queueBackends({ events: Math.round(50_000 * scale), jobs: Math.round(5_000 * scale), log });
}

const perSec = (x, unit) => `${Math.round(x).toLocaleString('en-US')} ${unit}/s`;

export function queueBackendsRows(r) {
  const { redis, postgres } = r.sync;
  const us = (s) => `${s.worker.toFixed(0)} / ${s.postgres.toFixed(0)} / ${s.redis.toFixed(0)} µs`;
  return [
    {
      measure: `sync --once end to end, queues in Redis (${r.events.toLocaleString('en-US')} events, median of ${r.rounds})`,
      result: perSec(redis.eventsPerSec, 'events'),
    },
    {
      measure: '  queues in Postgres (QUEUE_BACKEND=postgres, the same database)',
      result: perSec(postgres.eventsPerSec, 'events'),
      against: 'Redis (target 80 %)',
      ratio: pct(postgres.eventsPerSec / redis.eventsPerSec),
    },
    { measure: '  CPU per event, Redis: worker / Postgres backends / Redis', result: us(redis) },
    { measure: '  CPU per event, Postgres queues: worker / Postgres backends / Redis', result: us(postgres) },
    {
      measure: "  the worker's peak RSS, Redis / Postgres",
      result: `${redis.peakRssMb.toFixed(0)} MB / ${postgres.peakRssMb.toFixed(0)} MB`,
    },
    {
      measure: '  every round, Redis / Postgres (events/s)',
      result: redis.runs.map((x, i) => `${x}/${postgres.runs[i]}`).join(' '),
    },
    ...r.concurrencies.flatMap((c) => consumerRows(r, c)),
  ];
}

/** The consumer at concurrency `c` on both backends, as a share of the bare commit rate at `c`. */
function consumerRows(r, c) {
  const { redis, postgres } = { redis: r.consumer.redis[c], postgres: r.consumer.postgres[c] };
  const ceiling = r.ceiling[c].commitsPerSec;
  const us = (s) => `${s.node.toFixed(0)} / ${s.postgres.toFixed(0)} / ${s.redis.toFixed(0)} µs`;
  // The target, at the default concurrency.
  const target = (s) => (c === DEFAULT ? { target: '≥ 1,000 jobs/s', ok: s.jobsPerSec >= 1000 } : {});
  return [
    {
      measure: `bare commit rate of this Postgres, ${c} clients (BEGIN; INSERT; COMMIT, median of ${r.rounds})`,
      result: perSec(ceiling, 'commits'),
    },
    {
      measure: `  createConsumer, concurrency ${c}${c === DEFAULT ? ' (default)' : ''}, queues in Redis (${r.jobs.toLocaleString('en-US')} jobs)`,
      result: perSec(redis.jobsPerSec, 'jobs'),
      against: 'the commit rate',
      ratio: pct(redis.jobsPerSec / ceiling),
      ...target(redis),
    },
    {
      measure: '  queues in Postgres',
      result: perSec(postgres.jobsPerSec, 'jobs'),
      against: 'the commit rate',
      ratio: pct(postgres.jobsPerSec / ceiling),
      ...target(postgres),
    },
    {
      measure: '  CPU per job, Redis / Postgres queues: node / Postgres backends / Redis',
      result: `${us(redis)}, ${us(postgres)}`,
    },
    {
      measure: '  every round, Redis / Postgres / commit rate (per s)',
      result: redis.runs.map((x, i) => `${x}/${postgres.runs[i]}/${r.ceiling[c].runs[i]}`).join(' '),
    },
  ];
}
