// What one watch claim costs at 1,000 and at 100,000 sources: lease rows whose next
// turns are spread over a 300 s interval, a few of them due; claims of one source
// each (a lane that just freed up), each given back due an interval later. Timed per
// claim, and one claim explained (ANALYZE, BUFFERS) after a VACUUM. Beside it, the claim this one
// replaced (it named the file's sources), from another build: `--before <dist>`.
//   npm run build && node bench/claim-cost.mjs [--before /path/to/old/dist]
import { parseArgs } from 'node:util';
import { claimDue } from '../dist/store/lease.js';
import { claimStatement } from '../dist/store/lease-statements.js';
import { cleanUp } from './lib/env.mjs';
import { migratedStore } from './lib/store.mjs';

const { values } = parseArgs({ options: { before: { type: 'string' } } });
const old = values.before ? await import(`${values.before}/store/lease.js`) : null;
const CLAIMS = 200;
const lease = { holder: 'bench/1', leaseMs: 30_000 };
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

async function measure(store, names, claim) {
  const t = `"${store.schema}".leases`;
  // Spread over the interval, the most overdue first; CLAIMS + 10 of them due now.
  await store.pool.query(
    `UPDATE ${t} SET holder = NULL, expires_at = NULL,
       due_at = now() + (CASE WHEN ord <= $1 THEN -1 ELSE 1 END) * (ord % 300) * interval '1 second'
     FROM (SELECT source AS s, row_number() OVER (ORDER BY source) AS ord FROM ${t}) o WHERE source = o.s`,
    [CLAIMS + 10],
  );
  await store.pool.query(`VACUUM ANALYZE ${t}`);
  const times = [];
  for (let i = 0; i < CLAIMS; i++) {
    const started = performance.now();
    const leases = await claim(names);
    times.push(performance.now() - started);
    if (leases.length !== 1) throw new Error(`claim ${i} took ${leases.length} sources`);
    await leases[0].release({ dueInMs: 300_000 });
  }
  return median(times);
}

async function explain(store) {
  // Without the dead index entries of the claims just made (autovacuum's work in a live
  // fleet; on a shared Postgres a long transaction elsewhere keeps them in every scan).
  await store.pool.query(`VACUUM "${store.schema}".leases`);
  const client = await store.pool.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${claimStatement(store)}`, [
      lease.holder,
      lease.leaseMs,
      1,
      null,
      [],
    ]);
    await client.query('ROLLBACK');
    const plan = rows[0]['QUERY PLAN'][0];
    return {
      ms: plan['Execution Time'],
      buffers: plan.Plan['Shared Hit Blocks'] + plan.Plan['Shared Read Blocks'],
    };
  } finally {
    client.release();
  }
}

try {
  for (const n of [1_000, 100_000]) {
    const store = await migratedStore(`claim${n}`);
    try {
      const names = Array.from({ length: n }, (_, i) => `acct-${String(i).padStart(6, '0')}`);
      await store.pool.query(`INSERT INTO "${store.schema}".leases (source) SELECT unnest($1::text[])`, [
        names,
      ]);
      const now = await measure(store, names, async () => (await claimDue(store, 1, lease)).leases);
      const plan = await explain(store);
      const before = old ? await measure(store, names, (all) => old.claimDue(store, all, 1, lease)) : null;
      console.log(
        `${n.toLocaleString('en-US')} sources: a claim ${now.toFixed(2)} ms (median of ${CLAIMS}); ` +
          `explained: ${plan.ms.toFixed(2)} ms, ${plan.buffers} buffers` +
          (before === null ? '' : `; the claim that named the file's sources: ${before.toFixed(2)} ms`),
      );
    } finally {
      await store.close();
    }
  }
} finally {
  await cleanUp();
}
