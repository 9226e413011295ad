import { Queue, Worker } from 'bullmq';
import pg from 'pg';
import { createConsumer } from '../dist/consumer/index.js';
import { createLogger } from '../dist/logger.js';
import { jobIdFor, jobOptionsFor } from '../dist/queue/routes.js';
import { benchPrefix, benchSchema, DATABASE_URL, REDIS_URL, withPg } from './lib/env.mjs';
import { pct } from './lib/table.mjs';

/** Jobs at once, in both: the same as the consumer is given. */
const CONCURRENCY = 8;
const QUEUE = 'email-events';
const ROUNDS = 2;

/**
 * What the inbox costs: the same jobs (feedsync's job data, ids and options) consumed
 * by a bare BullMQ Worker that runs one INSERT per job on the pool, and by
 * createConsumer whose handler runs that INSERT in the transaction that records the
 * event in the inbox (BEGIN, inbox INSERT, the handler's INSERT, COMMIT). Rounds
 * alternate, so both see the same machine; jobs/s from the first job taken to the
 * last completed.
 */
export async function consumerCost({ jobs, log }) {
  const schema = benchSchema('consumer');
  await withPg((c) =>
    c.query(`CREATE SCHEMA "${schema}"; CREATE TABLE "${schema}".effects (source text, event_id text)`),
  );
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 * CONCURRENCY + 2 });
  const statement = `INSERT INTO "${schema}".effects (source, event_id) VALUES ($1, $2)`;
  const results = { bare: [], consumer: [] };
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const kind of ['bare', 'consumer']) {
        const prefix = benchPrefix(`consumer-${kind}-${round}`);
        await fill(prefix, jobs);
        log(`consumer cost: ${kind}, ${jobs} jobs (round ${round + 1} of ${ROUNDS})`);
        const seconds =
          kind === 'bare'
            ? await bare(prefix, jobs, (e) => pool.query(statement, [e.source, e.id]))
            : await inboxed(prefix, jobs, pool, schema, round, (e, db) =>
                db.query(statement, [e.source, e.id]),
              );
        results[kind].push(jobs / seconds);
      }
    }
  } finally {
    await pool.end();
  }
  const best = (xs) => Math.max(...xs);
  return {
    jobs,
    concurrency: CONCURRENCY,
    bare: best(results.bare),
    consumer: best(results.consumer),
    ratio: best(results.consumer) / best(results.bare),
    rounds: results,
  };
}

/** `jobs` email.delivered jobs as feedsync adds them. */
async function fill(prefix, jobs) {
  const queue = new Queue(QUEUE, { connection: { url: REDIS_URL }, prefix });
  const options = jobOptionsFor({ jobAttempts: 5, jobBackoffMs: 1000 });
  try {
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
  } finally {
    await queue.close();
  }
}

/** Seconds until `jobs` jobs completed, polled on a connection of its own. */
async function completed(prefix, jobs) {
  const queue = new Queue(QUEUE, { connection: { url: REDIS_URL }, prefix });
  try {
    for (;;) {
      if ((await queue.getCompletedCount()) >= jobs) return;
      const failed = await queue.getFailedCount();
      if (failed > 0) throw new Error(`consumer cost: ${failed} jobs failed`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  } finally {
    await queue.close();
  }
}

async function bare(prefix, jobs, statement) {
  const started = performance.now();
  const worker = new Worker(QUEUE, (job) => statement(job.data), {
    connection: { url: REDIS_URL, maxRetriesPerRequest: null },
    prefix,
    concurrency: CONCURRENCY,
  });
  try {
    await completed(prefix, jobs);
    return (performance.now() - started) / 1000;
  } finally {
    await worker.close();
  }
}

async function inboxed(prefix, jobs, pool, schema, round, statement) {
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
    await completed(prefix, jobs);
    return (performance.now() - started) / 1000;
  } finally {
    await consumer.close();
    await running;
  }
}

/** The section alone: 20,000 jobs a run at scale 1. */
export function consumerAlone({ scale, log }) {
  return consumerCost({ jobs: Math.round(20_000 * scale), log });
}

const jobsPerSec = (x) => `${Math.round(x).toLocaleString('en-US')} jobs/s`;

export function consumerRows(r) {
  return [
    {
      measure: `bare BullMQ Worker, one INSERT a job (concurrency ${r.concurrency}, ${r.jobs.toLocaleString('en-US')} jobs)`,
      result: jobsPerSec(r.bare),
    },
    {
      measure: '  createConsumer: the same INSERT in the handler, inbox row in the same transaction',
      result: jobsPerSec(r.consumer),
      against: 'the bare Worker',
      ratio: pct(r.ratio),
    },
  ];
}
