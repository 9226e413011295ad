// What marking a published outbox row costs Postgres, statement by statement: 200,000
// rows inserted, then marked 1,000 at a time by seq (the relay's UPDATE), or deleted so,
// with and without the unique index on (source, event_id) that schema version 3 dropped.
//   node bench/outbox-mark.mjs [rows]
import { benchSchema, cleanUp, withPg } from './lib/env.mjs';

const rows = Number(process.argv[2] ?? 200_000);
const table = (unique) => `(
  seq bigserial PRIMARY KEY, source text COLLATE "C" NOT NULL, event_id text COLLATE "C" NOT NULL,
  queue text NOT NULL, job_name text NOT NULL, payload jsonb, created_at timestamptz NOT NULL DEFAULT now(),
  published_at timestamptz${unique ? ', UNIQUE (source, event_id)' : ''})`;
const indexes = (t) => [
  `CREATE INDEX ON ${t} (seq) WHERE published_at IS NULL`,
  `CREATE INDEX ON ${t} (published_at) WHERE published_at IS NOT NULL`,
];
const batches = (statement) =>
  `DO $$ BEGIN FOR i IN 0..${Math.ceil(rows / 1000) - 1} LOOP ${statement} END LOOP; END $$`;
const bySeq = `seq = ANY(ARRAY(SELECT generate_series(i * 1000 + 1, i * 1000 + 1000)::bigint))`;

try {
  await withPg(async (db) => {
    const s = `"${benchSchema('mark')}"`;
    await db.query(`CREATE SCHEMA ${s}`);
    const timed = async (sql) => {
      const started = performance.now();
      await db.query(sql);
      return ((performance.now() - started) * 1000) / rows;
    };
    const results = [];
    for (const unique of [true, false]) {
      for (const end of ['UPDATE', 'DELETE']) {
        const t = `${s}.t_${unique ? 'u' : 'n'}_${end.toLowerCase()}`;
        await db.query(`CREATE TABLE ${t} ${table(unique)}`);
        for (const ix of indexes(t)) await db.query(ix);
        const insert = await timed(
          `INSERT INTO ${t} (source, event_id, queue, job_name)
           SELECT 'default', 'evt_' || lpad(g::text, 12, '0'), 'email-events', 'email.delivered'
           FROM generate_series(1, ${rows}) g`,
        );
        const mark = await timed(
          batches(
            end === 'UPDATE'
              ? `UPDATE ${t} SET published_at = now() WHERE ${bySeq} AND published_at IS NULL;`
              : `DELETE FROM ${t} WHERE ${bySeq};`,
          ),
        );
        results.push({ unique, end, insert, mark });
      }
    }
    console.log(`${rows.toLocaleString('en-US')} outbox rows, µs per row (wall time of one backend):`);
    console.log('| unique (source, event_id) | published rows | insert | mark |');
    console.log('|---|---|---:|---:|');
    for (const r of results) {
      console.log(
        `| ${r.unique ? 'yes' : 'no'} | ${r.end === 'UPDATE' ? 'marked (UPDATE)' : 'deleted'} | ${r.insert.toFixed(1)} | ${r.mark.toFixed(1)} |`,
      );
    }
  });
} finally {
  await cleanUp();
}
