import pg from 'pg';
import { benchSchema, DATABASE_URL, dropSchema, withPg } from './env.mjs';

/**
 * The bare commit rate of this Postgres: `clients` connections, each looping BEGIN; INSERT
 * one row; COMMIT into a scratch table of a schema of its own, for `ms` milliseconds.
 * What a consumer that commits one transaction per job can reach at most with as many
 * jobs in flight (it makes the same fsyncs, and more round trips). Commits per second.
 */
export async function commitRate({ clients, ms, label }) {
  const schema = benchSchema(`commit_rate_${label}`);
  await withPg((c) =>
    c.query(`CREATE SCHEMA "${schema}"; CREATE TABLE "${schema}".scratch (source text, event_id text)`),
  );
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: clients });
  const insert = `INSERT INTO "${schema}".scratch (source, event_id) VALUES ($1, $2)`;
  let commits = 0;
  try {
    // Connected before the clock starts, as the consumer's pool is warm when it runs.
    const conns = await Promise.all(Array.from({ length: clients }, () => pool.connect()));
    const started = performance.now();
    const until = started + ms;
    await Promise.all(
      conns.map(async (db, i) => {
        while (performance.now() < until) {
          await db.query('BEGIN');
          await db.query(insert, ['bench', `${i}-${commits}`]);
          await db.query('COMMIT');
          commits++;
        }
      }),
    );
    const elapsed = performance.now() - started;
    for (const db of conns) db.release();
    return commits / (elapsed / 1000);
  } finally {
    await pool.end();
    await dropSchema(schema);
  }
}
