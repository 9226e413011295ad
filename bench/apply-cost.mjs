// The apply statement's cost per event with contact_status and suppressions, against the
// statement before them (the baseline, built from git at BASELINE_COMMIT), side by side in
// one run: `node bench/run.mjs --only apply-cost` (after `npm run build`).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { transform } from 'esbuild';
import { eventsJson } from '../dist/store/applier.js';
import { applyStatement } from '../dist/store/apply-statement.js';
import { ensureCursor } from '../dist/store/cursor.js';
import { quoteSchema } from '../dist/store/db.js';
import { dropSchema, SOURCE } from './lib/env.mjs';
import { backlogEvents, migratedStore, route } from './lib/store.mjs';
import { pct } from './lib/table.mjs';

/** The last commit of main whose statement wrote email_status alone (the records not merged yet). */
const BASELINE_COMMIT = '707aa42';
const BATCH = 1000;

/**
 * The CPU time a process has run, in ms, from /proc/<pid>/schedstat (nanoseconds: /stat
 * counts in ticks of 10 ms, coarser than one batch).
 */
function cpuMs(pid) {
  return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
}

/** The baseline statement builder, compiled from the file as it was at BASELINE_COMMIT. */
async function baselineStatement() {
  let source;
  try {
    source = execFileSync('git', ['show', `${BASELINE_COMMIT}:src/store/apply-statement.ts`], {
      cwd: new URL('..', import.meta.url).pathname,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (err) {
    throw new Error(`apply-cost needs the git history (commit ${BASELINE_COMMIT}): ${err.message}`);
  }
  const { code } = await transform(source, { loader: 'ts', format: 'esm' });
  const dir = mkdtempSync(join(tmpdir(), 'feedsync-bench-'));
  try {
    writeFileSync(join(dir, 'baseline.mjs'), code);
    return (await import(join(dir, 'baseline.mjs'))).applyStatement;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * `count` events: the simulator's backlog (ten emails a cycle: sent, then delivered,
 * bounced, complained or failed), with every `contactEvery`-th one replaced by a contact
 * event (unsubscribed and subscribed in turn, over 1,000 addresses, so that most find
 * their row) when given.
 */
function eventsOf(count, contactEvery) {
  const events = backlogEvents(1, count, Date.UTC(2024, 0, 1));
  if (contactEvery) {
    for (let i = contactEvery - 1; i < count; i += contactEvery) {
      const n = Math.floor(i / contactEvery);
      events[i] = {
        ...events[i],
        type: n % 2 === 0 ? 'contact.unsubscribed' : 'contact.subscribed',
        data: { email: `Reader${n % 1000}@Example.test` },
      };
    }
  }
  return events;
}

/**
 * The applier's parameters for one batch that moves the cursor (src/store/applier.ts),
 * as many as `text` takes: the baseline's eleven, then no page checked for conflicts
 * ($12) and no cursor check ($13, $14), which the baseline had not.
 */
function paramsOf(text, events, prev) {
  const routes = {};
  for (const { type } of events) {
    const r = route(type);
    if (r) routes[type] = [r.queue, r.jobName];
  }
  // The applier's own JSON: the current statement reads the mailbox keys it adds (the baseline ignores them).
  const json = eventsJson(events);
  const params = [
    SOURCE,
    'feed',
    json,
    JSON.stringify(routes),
    true,
    prev,
    events.at(-1).id,
    [],
    [],
    '[]',
    null,
  ];
  return [...params, [], null, null].slice(0, highestParam(text));
}

/** The highest `$n` a statement's text names. */
const highestParam = (text) => Math.max(...[...text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));

/**
 * One mix of events through both statements into one schema over one connection, batch
 * by batch in turn (which statement goes first swapped every round), so that both meet
 * the same tables, the same indexes and the same caches: the CPU time of the Postgres
 * backend per batch (schedstat) is the measure (wall time is kept too, but on a busy machine it says
 * more about the neighbours). `events` holds the batches of both.
 */
async function measureMix(label, events, baseline) {
  const store = await migratedStore(`apply_${label}`, { max: 1 });
  try {
    const quoted = quoteSchema(store.schema);
    const texts = [baseline(quoted), applyStatement(quoted)];
    await ensureCursor(store, SOURCE, null);
    const backend = (await store.pool.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
    const wall = [0, 0];
    const cpu = [0, 0];
    // Each ABBA round's ratio, new over baseline: their median is what a burst of load elsewhere cannot move.
    const rounds = [];
    let round = [0, 0];
    let prev = null;
    for (let at = 0, k = 0; at < events.length; at += BATCH, k++) {
      const batch = events.slice(at, at + BATCH);
      // Batches 0, 1 go to statements 0, 1; batches 2, 3 to 1, 0; and so on.
      const v = (k + (Math.floor(k / 2) % 2)) % 2;
      const cpuBefore = cpuMs(backend);
      const started = performance.now();
      const { rows } = await store.pool.query(texts[v], paramsOf(texts[v], batch, prev));
      wall[v] += performance.now() - started;
      const used = cpuMs(backend) - cpuBefore;
      cpu[v] += used;
      round[v] += used;
      if (k % 4 === 3) {
        rounds.push(round[1] / round[0]);
        round = [0, 0];
      }
      if (!rows[0].ok) throw new Error('the batch did not apply');
      prev = batch.at(-1).id;
    }
    rounds.sort((a, b) => a - b);
    const { rows } = await store.pool.query(
      `SELECT (SELECT count(*) FROM ${quoted}.suppressions)::int AS suppressions,
              (SELECT count(*) FROM ${quoted}.contact_status)::int AS contacts`,
    );
    const perEvent = (ms) => (ms * 2000) / events.length;
    return {
      events: events.length / 2,
      baselineCpuUs: perEvent(cpu[0]),
      newCpuUs: perEvent(cpu[1]),
      cpuRatio: cpu[1] / cpu[0],
      medianRoundRatio: rounds[rounds.length >> 1],
      baselineWallUs: perEvent(wall[0]),
      newWallUs: perEvent(wall[1]),
      wallRatio: wall[1] / wall[0],
      ...rows[0],
    };
  } finally {
    await store.close();
    await dropSchema(store.schema);
  }
}

/** Both mixes: the simulator's backlog as it is, and with one event in five a contact event. */
export async function applyCost({ scale = 1, log = () => {} } = {}) {
  const count = Math.max(BATCH * 4, Math.round(100_000 * scale));
  const baseline = await baselineStatement();
  log(`apply cost: ${count} events per mix, batches of ${BATCH}, baseline ${BASELINE_COMMIT}`);
  // Each statement takes half of the batches.
  const emails = await measureMix('emails', eventsOf(2 * count, 0), baseline);
  const contacts = await measureMix('contacts', eventsOf(2 * count, 5), baseline);
  return { baselineCommit: BASELINE_COMMIT, emails, contacts };
}

export function applyCostRows(r) {
  const us = (x) => `${x.toFixed(1)} µs`;
  const rows = (name, m) => [
    {
      measure: `${name}: Postgres CPU per event (${m.events.toLocaleString('en-US')} events each; ${m.suppressions} suppressions, ${m.contacts} contacts)`,
      result: us(m.newCpuUs),
      against: `${us(m.baselineCpuUs)} before the records (${r.baselineCommit}); median of the ABBA rounds ${pct(m.medianRoundRatio)}`,
      ratio: pct(m.cpuRatio),
      target: '≤ 110%',
      ok: m.cpuRatio <= 1.1,
    },
    {
      measure: '  the same, wall time per event',
      result: us(m.newWallUs),
      against: us(m.baselineWallUs),
      ratio: pct(m.wallRatio),
    },
  ];
  return [
    ...rows('backlog mix (2 of 21 events bounce or complain)', r.emails),
    ...rows('one event in five a contact event', r.contacts),
  ];
}
