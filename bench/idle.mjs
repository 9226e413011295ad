import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { CONSUMER_DEFAULTS } from '../dist/consumer/defaults.js';
import { API_KEY, benchPrefix, CLI, REDIS_URL } from './lib/env.mjs';
import { startOwnPostgres } from './lib/own-postgres.mjs';
import { startSimChild } from './lib/simulator.mjs';

const CONSUMER = new URL('./lib/idle-consumer.mjs', import.meta.url).pathname;
const BACKENDS = ['redis', 'postgres'];
/** Events the source has caught up on before the idle window. */
const BACKLOG = 50;
/** Events added at each of LATENCY_TURNS watch turns, after the window: commit → handler. */
const PER_TURN = 10;
const LATENCY_TURNS = 3;
const APP = 'app';

/**
 * What a caught-up deployment costs its Postgres when nothing happens, on both queue
 * backends: one source in `feedsync sync --watch` (default SYNC_INTERVAL_MS) and one
 * consumer (createConsumer at its defaults, a process of its own), against a Postgres the
 * bench starts with pg_stat_statements (nothing else talks to it). The statements of a
 * measured window after catch-up (and after the consumer's first pruning round, a minute
 * after its start: rounds every 5 and 10 minutes are left to the page) are counted (top-level, as pg_stat_statements counts
 * them by default: BEGIN and COMMIT included). Then, still idle between, events committed
 * at a few watch turns give the time from their commit (the page transaction's
 * received_at) to the consumer's handler (its clock_timestamp(), the same clock); and a
 * consumer killed with SIGKILL inside a handler gives the time until another replica runs
 * that job again (lockDuration, then the stalled check).
 */
export async function idleAlone({ scale, log }) {
  const windowMs = Math.max(30_000, Math.round(180_000 * scale));
  const results = { windowMs, backends: {}, lockBoundMs: lockBounds() };
  for (const backend of BACKENDS) {
    results.backends[backend] = await oneBackend(backend, windowMs, log);
  }
  return results;
}

/**
 * How long after a kill its job runs again at the latest: the job must be seen active by
 * one stalled check and found without its lock by the next, so lockDuration + 2 ×
 * stalledInterval when the job started after the last check (a new replica's first check
 * falls inside the last one's interval and is skipped); lockDuration + stalledInterval
 * when a check saw it active.
 */
function lockBounds() {
  // BullMQ's own defaults, for a build whose CONSUMER_DEFAULTS does not name them.
  const bound =
    (CONSUMER_DEFAULTS.lockDuration ?? 30_000) + 2 * (CONSUMER_DEFAULTS.stalledInterval ?? 30_000);
  return { redis: bound, postgres: bound };
}

async function oneBackend(backend, windowMs, log) {
  const own = await startOwnPostgres();
  const sim = await startSimChild();
  const children = [];
  const db = new pg.Client({ connectionString: own.url });
  try {
    await db.connect();
    await db.query('CREATE EXTENSION pg_stat_statements');
    await db.query(
      `CREATE SCHEMA ${APP}; CREATE TABLE ${APP}.handled (event_id text NOT NULL, pid int NOT NULL, at timestamptz NOT NULL)`,
    );
    const queues =
      backend === 'postgres'
        ? { QUEUE_BACKEND: 'postgres', QUEUE_DATABASE_URL: own.url, QUEUE_PREFIX: 'feedsync_queues' }
        : { REDIS_URL, QUEUE_PREFIX: benchPrefix('idle') };
    const env = {
      PATH: process.env.PATH,
      DATABASE_URL: own.url,
      DATABASE_SCHEMA: 'feedsync',
      FEED_BASE_URL: sim.baseUrl,
      FEED_API_KEY: API_KEY,
      LOG_LEVEL: 'warn',
      ...queues,
    };
    await sim.setBacklog(BACKLOG);
    await runToEnd([CLI, 'migrate'], env);
    children.push(start([CLI, 'sync', '--watch'], env));
    const consumerEnv = { ...env, APP_DATABASE_URL: own.url, APP_SCHEMA: APP };
    const consumer = start([CONSUMER], consumerEnv);
    const consumerStarted = Date.now();
    children.push(consumer);
    const handled = async () =>
      Number((await db.query(`SELECT count(*) AS n FROM ${APP}.handled`)).rows[0].n);
    await until(async () => (await handled()) === BACKLOG, 120_000, 'the backlog handled');
    // A turn after catch-up, so that the window holds caught-up turns only, and past the
    // consumer's first pruning round (a minute after its start; then every 10 minutes).
    await sleep(Math.max(5_000, consumerStarted + 70_000 - Date.now()));
    log(`idle: ${backend} queues, caught up; counting statements for ${windowMs / 1000} s`);
    await db.query('SELECT pg_stat_statements_reset()');
    await sleep(windowMs);
    const { rows } = await db.query(
      `SELECT query, calls::int AS calls FROM pg_stat_statements
        WHERE query NOT ILIKE '%pg_stat_statements%' ORDER BY calls DESC`,
    );
    const statements = rows.reduce((sum, r) => sum + r.calls, 0);
    const perMinute = (statements * 60_000) / windowMs;
    log(`idle: ${backend}: ${statements} statements in ${windowMs / 1000} s = ${perMinute.toFixed(1)}/min`);
    for (const r of rows.slice(0, 12))
      log(`  ${String(r.calls).padStart(5)}  ${r.query.replace(/\s+/g, ' ').slice(0, 110)}`);

    const latencies = [];
    for (let turn = 0; turn < LATENCY_TURNS; turn++) {
      const before = await handled();
      await sim.addBacklog(PER_TURN);
      await until(async () => (await handled()) === before + PER_TURN, 120_000, 'the events of a turn');
    }
    const lat = await db.query(
      `SELECT extract(epoch FROM h.at - e.received_at) * 1000 AS ms
         FROM ${APP}.handled h JOIN feedsync.events e ON e.id = h.event_id
        ORDER BY h.at DESC LIMIT ${PER_TURN * LATENCY_TURNS}`,
    );
    latencies.push(...lat.rows.map((r) => Number(r.ms)));

    // A replica killed inside a handler: another runs that job again after its lock.
    consumer.child.kill('SIGTERM');
    await consumer.exited;
    const hanging = start([CONSUMER], { ...consumerEnv, HANG_FIRST: '1' });
    children.push(hanging);
    const before = await handled();
    await sim.addBacklog(1);
    await until(() => hanging.stdout().includes('hanging'), 120_000, 'a handler hanging');
    hanging.child.kill('SIGKILL');
    const killedAt = (await db.query('SELECT clock_timestamp() AS t')).rows[0].t;
    await hanging.exited;
    children.push(start([CONSUMER], consumerEnv));
    // The hung handler's row was rolled back with its transaction: one row more, by another replica.
    await until(async () => (await handled()) === before + 1, 180_000, 'the job run again');
    const back = await db.query(
      `SELECT extract(epoch FROM max(at) - $1::timestamptz) * 1000 AS ms FROM ${APP}.handled`,
      [killedAt],
    );
    return { statements, perMinute, top: rows.slice(0, 12), latencies, backAfterMs: Number(back.rows[0].ms) };
  } finally {
    for (const c of children) c.child.kill('SIGTERM');
    await Promise.all(children.map((c) => c.exited));
    await db.end().catch(() => {});
    await sim.stop();
    await own.stop();
  }
}

/** A node child of the bench, its stdout kept. */
function start(args, env) {
  const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (d) => {
    out += d;
  });
  child.stderr.setEncoding('utf8').on('data', (d) => {
    err += d;
  });
  const exited = child.exitCode !== null ? Promise.resolve() : once(child, 'close').then(() => undefined);
  return { child, exited, stdout: () => out, stderr: () => err };
}

async function runToEnd(args, env) {
  const run = start(args, env);
  await run.exited;
  if (run.child.exitCode !== 0)
    throw new Error(`${args.join(' ')}: exit ${run.child.exitCode}: ${run.stderr()}`);
}

async function until(probe, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`idle bench: timed out waiting for ${what}`);
    await sleep(200);
  }
}

const quantile = (values, q) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
};

/** The rows of the page: statements a minute idle, commit → handler, a killed job's return, per backend. */
export function idleRows(results) {
  const rows = [];
  for (const backend of BACKENDS) {
    const r = results.backends[backend];
    const name = backend === 'postgres' ? 'queues in Postgres' : 'queues in Redis';
    rows.push(
      {
        measure: `idle, ${name}: statements a minute (sync --watch + a consumer, ${results.windowMs / 1000} s window)`,
        result: r.perMinute.toFixed(1),
        target: '≤ 20',
        ok: r.perMinute <= 20,
      },
      {
        measure: `  commit → handler, p50 / p99 (${r.latencies.length} events over ${LATENCY_TURNS} turns)`,
        result: `${quantile(r.latencies, 0.5).toFixed(0)} / ${quantile(r.latencies, 0.99).toFixed(0)} ms`,
      },
      {
        measure: `  a consumer killed mid-job: the job runs again after`,
        result: `${(r.backAfterMs / 1000).toFixed(1)} s`,
        against: 'lockDuration + 2 × stalledInterval',
        target: `≤ ${(results.lockBoundMs[backend] / 1000).toFixed(0)} s`,
        ok: r.backAfterMs <= results.lockBoundMs[backend],
      },
    );
  }
  return rows;
}
