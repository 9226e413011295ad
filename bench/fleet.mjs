// A fleet of many small sources over two `sync --watch` replicas, as a platform runs
// it, through PgBouncer (transaction mode, as a managed pooled endpoint): the first pass
// to caught-up, then a steady window in which new events arrive in random accounts.
// Measures the turns a second, the time from an event's arrival in the feed to its
// storage (every one within the interval + 10 s?), the Postgres statements a turn
// costs (PgBouncer's SHOW STATS over the steady window, whose turns are nearly all
// caught up), the CPU a turn costs the replicas, the series each replica's /metrics
// serves, the peak RSS of each replica, and how long `status --json` takes.
//   npm run build && node bench/fleet.mjs [sources] [interval-ms] [steady-seconds] [replicas] [concurrency] [cli] [settle-seconds]
// (`cli`: another build's dist/bin/feedsync.js, for a before/after pair, `-` for this build's;
// `settle-seconds`: a wait between the first pass and the steady window, default 0. A first
// pass longer than the interval overlaps the second round of its first sources: waiting an
// interval measures the steady state instead.)
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { prepareSchema } from './end-to-end.mjs';
import { cpuMs } from './lib/cpu.mjs';
import { benchPrefix, CLI, cleanUp, DATABASE_URL, IMAGE_NODE_FLAGS } from './lib/env.mjs';
import { startPgBouncer } from './lib/pgbouncer.mjs';
import { startSimChild } from './lib/simulator.mjs';
import { workerEnv } from './lib/worker.mjs';

const sources = Number(process.argv[2] ?? 2_000);
const intervalMs = Number(process.argv[3] ?? 30_000);
const steadySeconds = Number(process.argv[4] ?? 90);
const replicas = Number(process.argv[5] ?? 2);
const concurrency = Number(process.argv[6] ?? 8);
const cli = process.argv[7] && process.argv[7] !== '-' ? process.argv[7] : CLI;
const settleSeconds = Number(process.argv[8] ?? 0);
const EVENTS = 3;
const keyOf = (i) => `sim_test_bench_fleet_${i}`;
const lastId = `evt_${String(EVENTS).padStart(12, '0')}`;

const hwmMb = (pid) => {
  try {
    return Number(/^VmHWM:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;
  } catch {
    return 0;
  }
};
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const freePort = () =>
  new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
const load = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const log = (msg) => console.log(`[fleet ${new Date().toISOString().slice(11, 19)}] ${msg}`);

const sim = await startSimChild();
const bouncer = await startPgBouncer(DATABASE_URL);
const dir = mkdtempSync(join(tmpdir(), 'feedsync-bench-fleet-'));
const db = new pg.Client({ connectionString: DATABASE_URL });
await db.connect();
const children = [];
try {
  const schema = await prepareSchema('fleet');
  const env = {
    ...workerEnv({ schema, prefix: benchPrefix('fleet'), baseUrl: sim.baseUrl }),
    DATABASE_URL: bouncer.url,
    SYNC_INTERVAL_MS: String(intervalMs),
    SYNC_CONCURRENCY: String(concurrency),
    METRICS_HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
  };
  // One key file a source: a hundred thousand variables would not fit in a process's environment.
  mkdirSync(join(dir, 'keys'));
  const entries = [];
  for (let i = 0; i < sources; i++) {
    writeFileSync(join(dir, 'keys', String(i)), keyOf(i));
    entries.push({ source: `acct-${i}`, api_key_file: join(dir, 'keys', String(i)) });
  }
  for (let i = 0; i < sources; i += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, sources - i) }, (_, j) => sim.setBacklog(EVENTS, keyOf(i + j))),
    );
  }
  env.FEED_SOURCES_FILE = join(dir, 'sources.json');
  writeFileSync(env.FEED_SOURCES_FILE, JSON.stringify({ sources: entries }));
  log(`${sources} accounts ready; load ${load()}`);

  const q = async (sql, params = []) => (await db.query(sql, params)).rows[0];
  const caughtUp = async () =>
    Number((await q(`SELECT count(*) AS n FROM "${schema}".cursors WHERE after_id >= $1`, [lastId])).n);
  const turns = async () =>
    Number((await q(`SELECT coalesce(sum(token), 0) AS n FROM "${schema}".leases`)).n);

  const ports = [];
  const started = performance.now();
  for (let r = 0; r < replicas; r++) {
    ports.push(await freePort());
    const child = spawn(process.execPath, [...IMAGE_NODE_FLAGS, cli, 'sync', '--watch'], {
      env: { ...env, HOSTNAME: `fleet-${r}`, METRICS_PORT: String(ports[r]) },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    children.push(child);
  }
  // Bounded: every source is caught up within ten intervals (and ten minutes), or the bench fails.
  let lastLog = performance.now();
  for (let n = await caughtUp(); n < sources; n = await caughtUp()) {
    if (performance.now() - started > 10 * intervalMs + 600_000)
      throw new Error(`first pass stuck at ${n} of ${sources}`);
    if (performance.now() - lastLog > 30_000) {
      log(`first pass: ${n} of ${sources} caught up; load ${load()}`);
      lastLog = performance.now();
    }
    await sleep(1_000);
  }
  const firstPassMs = performance.now() - started;
  log(`first pass done in ${(firstPassMs / 1000).toFixed(0)} s; load ${load()}`);

  if (settleSeconds > 0) {
    log(`settling for ${settleSeconds} s before the steady window`);
    await sleep(settleSeconds * 1000);
  }
  // Steady: new events in random accounts, one every 250 ms, each timed from its arrival.
  const cpu0 = children.map((c) => cpuMs(c.pid));
  const turns0 = await turns();
  const statements0 = await bouncer.queryCount();
  const t0 = performance.now();
  const arrivals = [];
  while (performance.now() - t0 < steadySeconds * 1000) {
    const i = Math.floor(Math.random() * sources);
    const res = await fetch(`${sim.origin}/_sim/contacts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        key: keyOf(i),
        type: 'contact.subscribed',
        email: `new${arrivals.length}@example.com`,
      }),
    });
    const event = await res.json();
    arrivals.push({ source: `acct-${i}`, id: event.id, at: Date.now() });
    await sleep(250);
  }
  const steadyMs = performance.now() - t0;
  const steadyTurns = (await turns()) - turns0;
  const statements = (await bouncer.queryCount()) - statements0;
  const cpu = children.reduce((sum, c, i) => sum + (cpuMs(c.pid) - cpu0[i]), 0);
  const loadSteady = load();
  // Every new event stored: waited for at most four intervals after its arrival (bounded).
  const latencies = [];
  for (const a of arrivals) {
    for (let tries = 0; ; tries++) {
      const row = await q(
        `SELECT (extract(epoch FROM received_at) * 1000)::float8 AS ms FROM "${schema}".events WHERE source = $1 AND id = $2`,
        [a.source, a.id],
      );
      if (row) {
        latencies.push(row.ms - a.at);
        break;
      }
      if (tries > (4 * intervalMs) / 500) throw new Error(`${a.source}/${a.id} never stored`);
      await sleep(500);
    }
  }
  latencies.sort((x, y) => x - y);
  const series = [];
  for (const port of ports) {
    const page = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    series.push(page.split('\n').filter((l) => l !== '' && !l.startsWith('#')).length);
  }
  const statusStarted = performance.now();
  const statusRun = spawn(process.execPath, [cli, 'status', '--json'], {
    env: { ...env, DATABASE_URL },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const statusCode = await new Promise((resolve) => statusRun.once('exit', resolve));
  const statusMs = performance.now() - statusStarted;
  const peaks = children.map((c) => hwmMb(c.pid));
  for (const c of children) c.kill('SIGTERM');
  await Promise.all(children.map((c) => new Promise((resolve) => c.once('exit', resolve))));
  const s = (ms) => `${(ms / 1000).toFixed(1)} s`;
  const bound = intervalMs + 10_000;
  console.log(
    [
      `${sources} sources x ${EVENTS} events, ${replicas} replicas x SYNC_CONCURRENCY=${concurrency}, SYNC_INTERVAL_MS=${intervalMs}, through PgBouncer`,
      `first pass to caught-up: ${s(firstPassMs)} (${Math.round(sources / (firstPassMs / 1000))} sources/s)` +
        (settleSeconds > 0 ? `; then ${settleSeconds} s before the steady window` : ''),
      `steady ${s(steadyMs)}: ${(steadyTurns / (steadyMs / 1000)).toFixed(1)} turns/s (${steadyTurns} turns; ` +
        `the interval asks for ${(sources / (intervalMs / 1000)).toFixed(1)}), ` +
        `${(cpu / Math.max(1, steadyTurns)).toFixed(2)} ms of replica CPU a turn, ` +
        `replicas' CPU ${((100 * cpu) / steadyMs).toFixed(0)}% of one core`,
      `Postgres statements a turn (PgBouncer SHOW STATS): ${(statements / Math.max(1, steadyTurns)).toFixed(2)} ` +
        `(${statements} over ${steadyTurns} turns)`,
      `arrival to storage, ${latencies.length} events: median ${s(latencies[latencies.length >> 1])}, ` +
        `longest ${s(latencies.at(-1))}; within the interval + 10 s (${s(bound)}): ` +
        `${latencies.filter((l) => l <= bound).length} of ${latencies.length}`,
      `series on /metrics per replica: ${series.join(', ')}`,
      `peak RSS per replica: ${peaks.map((m) => `${m.toFixed(0)} MB`).join(', ')}`,
      `status --json: ${s(statusMs)} (exit ${statusCode})`,
      `load average during the steady window (1, 5, 15 min): ${loadSteady}`,
    ].join('\n'),
  );
} finally {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await db.end();
  rmSync(dir, { recursive: true, force: true });
  bouncer.stop();
  await sim.stop();
  await cleanUp();
}
