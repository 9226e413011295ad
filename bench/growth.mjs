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
 * pruned), and one email_status row per two events. Ids start with `arc_` and
 * `em_arc_`: they never collide with the simulator's `evt_` and `em_bl_`, and sort
 * before them, as older events would. One INSERT … SELECT per table, run side by
 * side, then VACUUM ANALYZE, as autovacuum would have done, so that it does not
 * start in the middle of the measured run.
 */
export async function fillStore(store, count) {
  const s = `"${store.schema}"`;
  const t = `timestamptz '2020-01-01' + i * interval '100 ms'`;
  const type = `CASE WHEN i % 2 = 1 THEN 'email.sent' ELSE 'email.delivered' END`;
  const statements = [
    `INSERT INTO ${s}.events (source, id, type, created_at, data, received_via, received_at)
     SELECT $1, 'arc_' || lpad(i::text, 12, '0'),
       ${type}, ${t}, $2::jsonb, 'feed', ${t}
     FROM generate_series(1, $3::int) AS i`,
    `INSERT INTO ${s}.outbox (source, event_id, queue, job_name, payload, created_at, published_at)
     SELECT $1, 'arc_' || lpad(i::text, 12, '0'), 'email-events', ${type},
       jsonb_build_object('source', $1::text, 'id', 'arc_' || lpad(i::text, 12, '0'), 'type', ${type},
         'created_at', '2020-01-01T00:00:00.000Z', 'data', $2::jsonb),
       now() - interval '1 day', now() - interval '1 day' + i * interval '10 ms'
     FROM generate_series(1, $3::int) AS i`,
    `INSERT INTO ${s}.email_status (source, email_id, status, last_event_id, last_event_at, sent_at,
       delivered_at, recipients, recipients_event_id, recipients_event_at)
     SELECT $1, 'em_arc_' || lpad(i::text, 9, '0'), 'delivered', 'arc_' || lpad((2 * i)::text, 12, '0'),
       ${t} + interval '100 ms', ${t}, ${t} + interval '100 ms', ARRAY['delivered+' || i || '@example.test'],
       'arc_' || lpad((2 * i - 1)::text, 12, '0'), ${t}
     FROM generate_series(1, $3::int / 2) AS i`,
  ];
  await Promise.all(
    statements.map(async (text, k) => {
      const client = await store.pool.connect();
      try {
        // The email_status fill has no use for the data ($2): pass only what each statement names.
        const params = text.includes('$2') ? [SOURCE, FILL_DATA, count] : [SOURCE, count];
        await client.query(text.includes('$2') ? text : text.replaceAll('$3', '$2'), params);
        await client.query(`VACUUM (ANALYZE) ${s}.${['events', 'outbox', 'email_status'][k]}`);
      } finally {
        client.release();
      }
    }),
  );
}
