// A consumer process for the fault suite (test/faults/consumer.test.ts): createConsumer
// from the built dist/, a handler for every routed type that writes its effect with a
// plain INSERT (no ON CONFLICT: a second effect of one event would be a second row),
// and two fault hooks set by the environment:
//
//   KILL_AFTER_COMMIT=n  SIGKILL this process right after the n-th COMMIT of a job whose
//                        handler ran: the transaction committed, the job not completed.
//   STALL_EVERY=n        for every n-th event (by its number), block the event loop for
//                        STALL_MS inside the handler, after its INSERT: the job's lock is
//                        not renewed, BullMQ hands the job to another replica meanwhile.
//   HANG_ID=id          the handler of that event id hangs for ever after its INSERT,
//                        inside its transaction, and prints "hanging" (a hung HTTP
//                        call; the test may then freeze the process with SIGSTOP).
//   HANDLER_TIMEOUT_MS   the consumer's handlerTimeoutMs.
//
// Also APP_DATABASE_URL, APP_SCHEMA, CONSUMER_NAME, CONCURRENCY, and feedsync's
// REDIS_URL, QUEUE_PREFIX, LOG_LEVEL. SIGTERM closes the consumer and exits 0.
import pg from 'pg';
import { createConsumer } from '../../../dist/consumer/index.js';
import { CONTACT_EVENT_TYPES, EMAIL_EVENT_TYPES } from '../../../dist/event-types.js';

const env = process.env;
const schema = env.APP_SCHEMA;
const killAfter = Number(env.KILL_AFTER_COMMIT ?? 0);
const stallEvery = Number(env.STALL_EVERY ?? 0);
const stallMs = Number(env.STALL_MS ?? 0);

// No 'error' listener of its own: createConsumer keeps a lost idle client from ending the process.
const pool = new pg.Pool({ connectionString: env.APP_DATABASE_URL, max: 20 });

// The hook of KILL_AFTER_COMMIT: a client whose COMMIT, once Postgres answered, ends
// the process when the transaction ran a handler and the count is reached.
let applied = 0;
const hooked = new WeakSet();
const inHandler = new WeakSet();
const connect = pool.connect.bind(pool);
if (killAfter > 0) {
  // pool.query() connects with a callback: that form passes through untouched.
  pool.connect = (...args) => (args.length > 0 ? connect(...args) : connect().then(hook));
}

function hook(client) {
  if (hooked.has(client)) return client;
  hooked.add(client);
  const query = client.query.bind(client);
  client.query = async (...args) => {
    const result = await query(...args);
    if (args[0] === 'COMMIT' && inHandler.has(client)) {
      inHandler.delete(client);
      if (++applied === killAfter) process.kill(process.pid, 'SIGKILL');
    }
    return result;
  };
  return client;
}

async function effect(event, db) {
  inHandler.add(db);
  await db.query(
    `INSERT INTO "${schema}".effects (consumer, source, event_id, pid) VALUES ($1, $2, $3, $4)`,
    [env.CONSUMER_NAME, event.source, event.id, process.pid],
  );
  if (event.id === env.HANG_ID) {
    console.log('hanging');
    await new Promise(() => {});
  }
  if (stallEvery > 0 && Number(event.id.replace(/\D/g, '')) % stallEvery === 0) {
    const until = Date.now() + stallMs;
    while (Date.now() < until) {
      // Busy on purpose: the lock renewal cannot run.
    }
  }
}

const types = [...EMAIL_EVENT_TYPES, ...CONTACT_EVENT_TYPES];
const consumer = createConsumer({
  name: env.CONSUMER_NAME,
  pool,
  schema,
  concurrency: Number(env.CONCURRENCY ?? 4),
  handlers: Object.fromEntries(types.map((t) => [t, effect])),
  // A killed replica's jobs run again a second after; a job may stall any number of times.
  stalls: { lockDuration: 1_000, stalledInterval: 500, maxStalledCount: 1_000 },
  ...(env.HANDLER_TIMEOUT_MS ? { handlerTimeoutMs: Number(env.HANDLER_TIMEOUT_MS) } : {}),
});
await consumer.migrate();
process.once('SIGTERM', () => void consumer.close());
await consumer.run();
await pool.end();
