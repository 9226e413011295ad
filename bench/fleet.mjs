// A fleet of many small sources over two `sync --watch` replicas, as a platform runs
// it: the first pass to caught-up, then a steady window in which new events arrive in
// random accounts. Measures the turns a second, the time from an event's arrival in the
// feed to its storage (median, longest), the Postgres connections and the peak RSS of
// each replica, and the CPU a caught-up turn costs the replicas.
//   npm run build && node bench/fleet.mjs [sources] [interval-ms] [steady-seconds] [replicas] [concurrency]
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { prepareSchema } from './end-to-end.mjs';
import { backendsOf, cpuMs } from './lib/cpu.mjs';
import { benchPrefix, CLI, cleanUp, DATABASE_URL, IMAGE_NODE_FLAGS } from './lib/env.mjs';
import { startSimChild } from './lib/simulator.mjs';
import { workerEnv } from './lib/worker.mjs';

const sources = Number(process.argv[2] ?? 2_000);
const intervalMs = Number(process.argv[3] ?? 30_000);
const steadySeconds = Number(process.argv[4] ?? 90);
const replicas = Number(process.argv[5] ?? 2);
const concurrency = Number(process.argv[6] ?? 8);
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

const sim = await startSimChild();
const dir = mkdtempSync(join(tmpdir(), 'feedsync-bench-fleet-'));
const db = new pg.Client({ connectionString: DATABASE_URL });
await db.connect();
const children = [];
try {
  const schema = await prepareSchema('fleet');
  const env = {
    ...workerEnv({ schema, prefix: benchPrefix('fleet'), baseUrl: sim.baseUrl }),
    SYNC_INTERVAL_MS: String(intervalMs),
    SYNC_CONCURRENCY: String(concurrency),
    METRICS_PORT: '0',
    LOG_LEVEL: 'warn',
  };
  const entries = [];
  for (let i = 0; i < sources; i++) {
    await sim.setBacklog(EVENTS, keyOf(i));
    env[`FLEET_KEY_${i}`] = keyOf(i);
    entries.push({ source: `acct-${i}`, api_key_env: `FLEET_KEY_${i}` });
  }
  env.FEED_SOURCES_FILE = join(dir, 'sources.json');
  writeFileSync(env.FEED_SOURCES_FILE, JSON.stringify({ sources: entries }));

  const q = async (sql, params = []) => (await db.query(sql, params)).rows[0];
  const caughtUp = async () =>
    Number((await q(`SELECT count(*) AS n FROM "${schema}".cursors WHERE after_id >= $1`, [lastId])).n);
  const turns = async () =>
    Number((await q(`SELECT coalesce(sum(token), 0) AS n FROM "${schema}".leases`)).n);

  const started = performance.now();
  for (let r = 0; r < replicas; r++) {
    const child = spawn(process.execPath, [...IMAGE_NODE_FLAGS, CLI, 'sync', '--watch'], {
      env: { ...env, HOSTNAME: `fleet-${r}` },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    children.push(child);
  }
  const connections = children.map(() => 0);
  const sampleConnections = async () => {
    for (const [i, c] of children.entries())
      connections[i] = Math.max(connections[i], (await backendsOf(db, c.pid)).length);
  };
  // Bounded: every source is caught up within ten intervals, or the bench fails.
  for (let n = await caughtUp(); n < sources; n = await caughtUp()) {
    if (performance.now() - started > 10 * intervalMs + 600_000)
      throw new Error(`first pass stuck at ${n} of ${sources}`);
    await sampleConnections();
    await sleep(500);
  }
  const firstPassMs = performance.now() - started;

  // Steady: new events in random accounts, one every 250 ms, each timed from its arrival.
  const cpu0 = children.map((c) => cpuMs(c.pid));
  const turns0 = await turns();
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
    await sampleConnections();
    await sleep(250);
  }
  const steadyMs = performance.now() - t0;
  const steadyTurns = (await turns()) - turns0;
  const cpu = children.reduce((sum, c, i) => sum + (cpuMs(c.pid) - cpu0[i]), 0);
  // Every new event stored: at most one interval plus a turn after its arrival (bounded wait).
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
  const peaks = children.map((c) => hwmMb(c.pid));
  for (const c of children) c.kill('SIGTERM');
  await Promise.all(children.map((c) => new Promise((resolve) => c.once('exit', resolve))));
  const s = (ms) => `${(ms / 1000).toFixed(1)} s`;
  console.log(
    [
      `${sources} sources x ${EVENTS} events, ${replicas} replicas x SYNC_CONCURRENCY=${concurrency}, SYNC_INTERVAL_MS=${intervalMs}`,
      `first pass to caught-up: ${s(firstPassMs)} (${Math.round(sources / (firstPassMs / 1000))} sources/s)`,
      `steady ${s(steadyMs)}: ${(steadyTurns / (steadyMs / 1000)).toFixed(1)} turns/s (${steadyTurns} turns), ` +
        `${(cpu / Math.max(1, steadyTurns)).toFixed(2)} ms of replica CPU a turn`,
      `arrival to storage, ${latencies.length} events: median ${s(latencies[latencies.length >> 1])}, longest ${s(latencies.at(-1))}`,
      `Postgres connections per replica (most seen): ${connections.join(', ')}`,
      `peak RSS per replica: ${peaks.map((m) => `${m.toFixed(0)} MB`).join(', ')}`,
    ].join('\n'),
  );
} finally {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await db.end();
  rmSync(dir, { recursive: true, force: true });
  await sim.stop();
  await cleanUp();
}
