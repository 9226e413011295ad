import { Queue, Worker } from 'bullmq';
import pg from 'pg';
import { createConsumer } from '../dist/consumer/index.js';
import { createLogger } from '../dist/logger.js';
import { jobIdFor, jobOptionsFor } from '../dist/queue/routes.js';
import { backendMeter } from './lib/cpu.mjs';
import { benchPrefix, benchSchema, DATABASE_URL, REDIS_URL, withPg } from './lib/env.mjs';
import { pct } from './lib/table.mjs';

/** Jobs at once, in both: the same as the consumer is given. */
const CONCURRENCY = 8;
const QUEUE = 'email-events';
/** Rounds of both, alternating; the medians are reported (a shared machine is noisy). */
const ROUNDS = 5;

/**
 * What the inbox costs: the same jobs (feedsync's job data, ids and options) consumed
 * by a bare BullMQ Worker that runs one INSERT per job on the pool, and by
 * createConsumer whose handler runs that INSERT in the transaction that records the
 * event in the inbox (BEGIN, inbox INSERT, the handler's INSERT, COMMIT). Rounds
 * alternate, so both see the same machine; jobs/s from the start of the worker to the
 * last job completed, the median of the rounds.
 */
export async function consumerCost({ jobs, log }) {
  const schema = benchSchema('consumer');
  await withPg((c) =>
    c.query(`CREATE SCHEMA "${schema}"; CREATE TABLE "${schema}".effects (source text, event_id text)`),
  );
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 * CONCURRENCY + 2 });
  // CPU per job hardly depends on how busy the machine is, which jobs/s does.
  const monitor = new pg.Client({ connectionString: DATABASE_URL });
  await monitor.connect();
  const meter = backendMeter(monitor, process.pid);
  const statement = `INSERT INTO "${schema}".effects (source, event_id) VALUES ($1, $2)`;
  const results = { bare: [], consumer: [] };
  const cpu = { bare: [], consumer: [] };
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const kind of ['bare', 'consumer']) {
        const prefix = benchPrefix(`consumer-${kind}-${round}`);
        await fill(prefix, jobs);
        log(`consumer cost: ${kind}, ${jobs} jobs (round ${round + 1} of ${ROUNDS})`);
        await meter.sample();
        const before = { bench: process.cpuUsage(), postgres: meter.totalMs() };
        const seconds =
          kind === 'bare'
            ? await bare(prefix, jobs, meter, (e) => pool.query(statement, [e.source, e.id]))
            : await inboxed(prefix, jobs, meter, pool, schema, round, (e, db) =>
                db.query(statement, [e.source, e.id]),
              );
        await meter.sample();
        const bench = process.cpuUsage(before.bench);
        results[kind].push(jobs / seconds);
        cpu[kind].push({
          bench: (bench.user + bench.system) / jobs,
          postgres: ((meter.totalMs() - before.postgres) * 1000) / jobs,
        });
      }
    }
  } finally {
    await pool.end();
    await monitor.end();
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  return {
    jobs,
    rounds: ROUNDS,
    concurrency: CONCURRENCY,
    bare: median(results.bare),
    consumer: median(results.consumer),
    ratio: median(results.consumer) / median(results.bare),
    runs: results,
    cpu: {
      bare: {
        bench: median(cpu.bare.map((c) => c.bench)),
        postgres: median(cpu.bare.map((c) => c.postgres)),
      },
      consumer: {
        bench: median(cpu.consumer.map((c) => c.bench)),
        postgres: median(cpu.consumer.map((c) => c.postgres)),
      },
    },
  };
}

/** `jobs` email.delivered jobs as feedsync adds them. */
async function fill(prefix, jobs) {
  const queue = new Queue(QUEUE, { connection: { url: REDIS_URL }, prefix });
  try {
    await fillQueue(queue, jobs);
  } finally {
    await queue.close();
  }
}

/** `jobs` email.delivered jobs as feedsync adds them (its data, ids and options), into a queue of either backend. */
export async function fillQueue(queue, jobs) {
  const options = jobOptionsFor({ jobAttempts: 5, jobBackoffMs: 1000 });
  for (let from = 0; from < jobs; from += 1000) {
    const batch = [];
    for (let i = from; i < Math.min(jobs, from + 1000); i++) {
      const id = `evt_${String(i).padStart(12, '0')}`;
      const data = {
        source: 'default',
        id,
        type: 'email.delivered',
        created_at: '2026-01-01T00:00:00.000Z',
        data: { email_id: `em_${i}`, to: [`person${i}@example.com`] },
      };
      batch.push({ name: data.type, data, opts: { ...options, jobId: jobIdFor('default', id) } });
    }
    await queue.addBulk(batch);
  }
}

/** Returns once `jobs` jobs completed, polled on a connection of its own, sampling the Postgres backends meanwhile. */
async function completed(prefix, jobs, meter) {
  const queue = new Queue(QUEUE, { connection: { url: REDIS_URL }, prefix });
  try {
    for (;;) {
      if ((await queue.getCompletedCount()) >= jobs) return;
      const failed = await queue.getFailedCount();
      if (failed > 0) throw new Error(`consumer cost: ${failed} jobs failed`);
      await meter.sample();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  } finally {
    await queue.close();
  }
}

async function bare(prefix, jobs, meter, statement) {
  const started = performance.now();
  const worker = new Worker(QUEUE, (job) => statement(job.data), {
    connection: { url: REDIS_URL, maxRetriesPerRequest: null },
    prefix,
    concurrency: CONCURRENCY,
  });
  try {
    await completed(prefix, jobs, meter);
    return (performance.now() - started) / 1000;
  } finally {
    await worker.close();
  }
}

async function inboxed(prefix, jobs, meter, pool, schema, round, statement) {
  const consumer = createConsumer({
    name: `bench-${round}`,
    pool,
    schema,
    concurrency: CONCURRENCY,
    handlers: { 'email.delivered': statement },
    env: { REDIS_URL, QUEUE_PREFIX: prefix },
    logger: createLogger({ level: 'silent' }),
  });
  await consumer.migrate();
  const started = performance.now();
  const running = consumer.run();
  try {
    await completed(prefix, jobs, meter);
    return (performance.now() - started) / 1000;
  } finally {
    await consumer.close();
    await running;
  }
}

/** The section alone: 5,000 jobs a run at scale 1. */
export function consumerAlone({ scale, log }) {
  return consumerCost({ jobs: Math.round(5_000 * scale), log });
}

const jobsPerSec = (x) => `${Math.round(x).toLocaleString('en-US')} jobs/s`;

export function consumerRows(r) {
  return [
    {
      measure: `bare BullMQ Worker, one INSERT a job (concurrency ${r.concurrency}, ${r.jobs.toLocaleString('en-US')} jobs, median of ${r.rounds})`,
      result: jobsPerSec(r.bare),
    },
    {
      measure: '  createConsumer: the same INSERT in the handler, inbox row in the same transaction',
      result: jobsPerSec(r.consumer),
      against: 'the bare Worker',
      ratio: pct(r.ratio),
    },
    {
      measure: 'CPU per job, bare Worker: bench process (worker, BullMQ) / Postgres backends',
      result: `${r.cpu.bare.bench.toFixed(0)} µs / ${r.cpu.bare.postgres.toFixed(0)} µs`,
    },
    {
      measure: '  createConsumer',
      result: `${r.cpu.consumer.bench.toFixed(0)} µs / ${r.cpu.consumer.postgres.toFixed(0)} µs`,
      against: 'the bare Worker (sum)',
      ratio: pct((r.cpu.consumer.bench + r.cpu.consumer.postgres) / (r.cpu.bare.bench + r.cpu.bare.postgres)),
    },
    {
      measure: '  every round, bare / createConsumer (jobs/s)',
      result: r.runs.bare.map((x, i) => `${Math.round(x)}/${Math.round(r.runs.consumer[i])}`).join(' '),
    },
  ];
}
