import { SOURCE } from './lib/env.mjs';

/** The data of every filler event: the same shape and size as a backlog event's. */
const FILL_DATA = JSON.stringify({
  email_id: 'em_arc_000000001',
  from: 'backlog@example.test',
  to: ['delivered+1@example.test'],
  subject: 'Backlog message 1',
});

/**
 * Fills a migrated schema as if `count` older events had been stored: the events,
 * their outbox rows (published a day ago, inside the retention, so nothing is
 * pruned; no payload, as the applier writes them since schema version 3), and one email_status row per two events. Ids start with `arc_` and
 * `em_arc_`: they never collide with the simulator's `evt_` and `em_bl_`, and sort
 * before them, as older events would. One INSERT … SELECT per table, run side by
 * side, then VACUUM ANALYZE, as autovacuum would have done, so that it does not
 * start in the middle of the measured run, and a checkpoint.
 */
export async function fillStore(store, count) {
  const s = `"${store.schema}"`;
  const t = `timestamptz '2020-01-01' + i * interval '100 ms'`;
  const type = `CASE WHEN i % 2 = 1 THEN 'email.sent' ELSE 'email.delivered' END`;
  const id = (n) => `'arc_' || lpad((${n})::text, 12, '0')`;
  const fills = [
    {
      table: 'events',
      text: `INSERT INTO ${s}.events (source, id, type, created_at, data, received_via, received_at)
        SELECT $1, ${id('i')}, ${type}, ${t}, $2::jsonb, 'feed', ${t}
        FROM generate_series(1, $3::int) AS i`,
      values: [SOURCE, FILL_DATA, count],
    },
    {
      table: 'outbox',
      text: `INSERT INTO ${s}.outbox (source, event_id, queue, job_name, created_at, published_at)
        SELECT $1, ${id('i')}, 'email-events', ${type},
          now() - interval '1 day', now() - interval '1 day' + i * interval '10 ms'
        FROM generate_series(1, $2::int) AS i`,
      values: [SOURCE, count],
    },
    {
      table: 'email_status',
      text: `INSERT INTO ${s}.email_status (source, email_id, status, last_event_id, last_event_at, sent_at,
          delivered_at, recipients, recipients_event_id, recipients_event_at)
        SELECT $1, 'em_arc_' || lpad(i::text, 9, '0'), 'delivered', ${id('2 * i')},
          ${t} + interval '100 ms', ${t}, ${t} + interval '100 ms',
          ARRAY['delivered+' || i || '@example.test'], ${id('2 * i - 1')}, ${t}
        FROM generate_series(1, $2::int / 2) AS i`,
      values: [SOURCE, count],
    },
  ];
  await Promise.all(
    fills.map(async ({ table, text, values }) => {
      const client = await store.pool.connect();
      try {
        await client.query(text, values);
        await client.query(`VACUUM (ANALYZE) ${s}.${table}`);
      } finally {
        client.release();
      }
    }),
  );
  // Write the fill's dirty pages out now rather than during the next measured runs
  // (it needs the pg_checkpoint role or a superuser; without it, the runs just share the cost).
  await store.pool.query('CHECKPOINT').catch(() => {});
}
