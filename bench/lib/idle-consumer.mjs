// A consumer at its defaults for the idle bench (bench/idle.mjs): createConsumer from the
// built dist/, whose handler records when it ran (clock_timestamp(), in the database whose
// clock stamped the event's commit). HANG_FIRST=1: the first handler run hangs after its
// INSERT, printing "hanging" (the bench then kills this process mid-job). SIGTERM closes it.
import pg from 'pg';
import { createConsumer } from '../../dist/consumer/index.js';
import { CONTACT_EVENT_TYPES, EMAIL_EVENT_TYPES } from '../../dist/event-types.js';

const env = process.env;
const schema = env.APP_SCHEMA;
const pool = new pg.Pool({ connectionString: env.APP_DATABASE_URL, max: 18 });

let hung = false;

async function handled(event, db) {
  await db.query(`INSERT INTO "${schema}".handled (event_id, pid, at) VALUES ($1, $2, clock_timestamp())`, [
    event.id,
    process.pid,
  ]);
  if (env.HANG_FIRST === '1' && !hung) {
    hung = true;
    console.log('hanging');
    await new Promise(() => {});
  }
}

const consumer = createConsumer({
  name: 'idle',
  pool,
  schema,
  handlers: Object.fromEntries([...EMAIL_EVENT_TYPES, ...CONTACT_EVENT_TYPES].map((t) => [t, handled])),
});
await consumer.migrate();
process.once('SIGTERM', () => void consumer.close());
console.log('consuming');
await consumer.run();
await pool.end();
