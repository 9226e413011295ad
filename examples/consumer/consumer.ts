// A consumer of feedsync's jobs: it records what happened to your messages in your
// own tables, once per event, however often a job runs. It never sends mail: a bounce
// or a complaint is recorded, and whether to send anything is decided elsewhere.
//
//   npm run build && npx tsc -p examples/consumer && node examples/consumer/dist/consumer.js
//
// `createConsumer` (feedsync/consumer) does the once-only part: each job runs in one
// transaction that records the event in the inbox table and calls the type's handler
// only if the event is new. The handlers below only say what an event changes.
//
// Environment: the queue settings have feedsync's names and defaults (REDIS_URL,
// QUEUE_PREFIX, QUEUE_EMAIL_EVENTS, QUEUE_CONTACT_EVENTS), read by createConsumer;
// APP_DATABASE_URL (your database) and APP_SCHEMA (default `feedsync_example_consumer`),
// where schema.sql and the inbox are made at start. The schema is marked as the
// example's: one that exists without the mark (your application's own, say) is
// refused, never written into. examples/consumer/README.md says more.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createConsumer, EMAIL_STATUS_RANK, type EventOfType, FeedsyncError } from 'feedsync/consumer';
import pg from 'pg';

const settings = {
  databaseUrl: process.env.APP_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres',
  schema: process.env.APP_SCHEMA || 'feedsync_example_consumer',
};
if (!/^[a-z_][a-z0-9_]{0,62}$/.test(settings.schema)) {
  console.error('APP_SCHEMA: must be a lowercase SQL identifier');
  process.exit(2);
}

/** Set when the reader of stdout went away: the lines per event are no longer printed. */
let stdoutClosed = false;

/** One line on stdout, while someone reads it. */
function print(line: string): void {
  if (!stdoutClosed) console.log(line);
}

/** The comment that marks a schema as this example's. */
const MARK = 'feedsync example consumer';

const pool = new pg.Pool({
  connectionString: settings.databaseUrl,
  options: `-c search_path=${settings.schema}`,
  // A client per job in flight (the consumer's default concurrency, 16, on the email
  // queue), and two to spare; pg's default of 10 would hold jobs waiting for a client.
  max: 18,
});
// An idle client that Postgres ends (a restart, idle_session_timeout) is an 'error' of the
// pool: createConsumer logs it when the pool has no listener, as here. An application
// with its own listener keeps it; the process must never be left without one.

type EmailEvent = EventOfType<
  'email.sent' | 'email.delivered' | 'email.bounced' | 'email.complained' | 'email.failed'
>;

/**
 * The latest state of a message. Events may come in any order: an older one never
 * overwrites a newer state. Two events of the same instant (a retried email.sent beside
 * its email.delivered) are ordered by rank, as feedsync's email_status does, then by id.
 */
async function recordMessage(event: EmailEvent, db: pg.PoolClient): Promise<void> {
  await db.query(
    `INSERT INTO messages (source, email_id, last_event, last_event_rank, last_event_id, last_event_at)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (source, email_id) DO UPDATE SET last_event = EXCLUDED.last_event,
       last_event_rank = EXCLUDED.last_event_rank, last_event_id = EXCLUDED.last_event_id,
       last_event_at = EXCLUDED.last_event_at
     WHERE (messages.last_event_at, messages.last_event_rank, messages.last_event_id)
         < (EXCLUDED.last_event_at, EXCLUDED.last_event_rank, EXCLUDED.last_event_id)`,
    [
      event.source,
      event.data.email_id,
      event.type,
      EMAIL_STATUS_RANK[event.type],
      event.id,
      event.created_at,
    ],
  );
  // One line per event recorded: its key, type and email id, never an address.
  print(`${event.source}/${event.id} ${event.type} ${event.data.email_id}: recorded`);
}

/** A bounce or a complaint: its recipients are recorded as not to be mailed again (never acted on here). */
async function suppress(
  event: EventOfType<'email.bounced' | 'email.complained'>,
  db: pg.PoolClient,
): Promise<void> {
  await recordMessage(event, db);
  await db.query(
    `INSERT INTO suppressed_addresses (address, reason, event_key, since)
     SELECT lower(a), $2, $3, $4 FROM unnest($1::text[]) AS a ON CONFLICT (address) DO NOTHING`,
    [event.data.to, event.type, `${event.source}/${event.id}`, event.created_at],
  );
}

/** A newsletter subscription; the service's contact events carry the address in data.email. */
async function subscription(
  event: EventOfType<'contact.subscribed' | 'contact.unsubscribed'>,
  db: pg.PoolClient,
): Promise<void> {
  if (typeof event.data.email !== 'string') return;
  await db.query(
    `INSERT INTO subscriptions (address, subscribed, changed_at) VALUES (lower($1), $2, $3)
     ON CONFLICT (address) DO UPDATE SET subscribed = EXCLUDED.subscribed, changed_at = EXCLUDED.changed_at
     WHERE subscriptions.changed_at <= EXCLUDED.changed_at`,
    [event.data.email, event.type === 'contact.subscribed', event.created_at],
  );
  print(`${event.source}/${event.id} ${event.type}: recorded`);
}

/** Makes the tables, then consumes until SIGTERM or Ctrl-C. */
async function main(): Promise<void> {
  await claimSchema();
  await pool.query(readFileSync(schemaFile(), 'utf8'));
  const consumer = createConsumer({
    name: 'example',
    pool,
    schema: settings.schema,
    handlers: {
      'email.sent': recordMessage,
      'email.delivered': recordMessage,
      'email.failed': recordMessage,
      'email.bounced': suppress,
      'email.complained': suppress,
      'contact.subscribed': subscription,
      'contact.unsubscribed': subscription,
    },
  });
  await consumer.migrate();
  print(`consuming feedsync's queues into ${target()}`);
  // SIGTERM or Ctrl-C: the jobs in hand finish and commit, then the process leaves.
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.once(signal, () => void consumer.close());
  // A reader that goes away (`… | head -2`) stops it the same way: the jobs in hand
  // finish, nothing more is printed, and it exits 0.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
    stdoutClosed = true;
    void consumer.close();
  });
  await consumer.run();
}

try {
  await main();
} catch (err) {
  // Redis or Postgres down, a bad setting: one line saying which, not a stack trace.
  const message = err instanceof Error ? err.message : String(err);
  console.error(
    err instanceof FeedsyncError
      ? `consumer: ${message}`
      : `consumer: Postgres at ${target()} (APP_DATABASE_URL): ${message}`,
  );
  process.exitCode = err instanceof FeedsyncError ? err.exitCode : 1;
} finally {
  await pool.end();
}

/**
 * Creates the schema and marks it, or takes an empty one, or one marked before. A schema
 * that holds anything else is not the example's to write into: exit 2.
 */
async function claimSchema(): Promise<void> {
  const found = await pool.query<{ mark: string | null; tables: string }>(
    `SELECT obj_description(n.oid, 'pg_namespace') AS mark,
       (SELECT count(*) FROM pg_class c WHERE c.relnamespace = n.oid) AS tables
     FROM pg_namespace n WHERE n.nspname = $1`,
    [settings.schema],
  );
  const schema = found.rows[0];
  if (schema && schema.mark !== MARK && Number(schema.tables) > 0) {
    console.error(
      `APP_SCHEMA: schema ${settings.schema} already holds tables that this example did not make; ` +
        'name a new or an empty one',
    );
    await pool.end();
    process.exit(2);
  }
  await pool.query(`CREATE SCHEMA IF NOT EXISTS ${settings.schema}`);
  await pool.query(`COMMENT ON SCHEMA ${settings.schema} IS '${MARK}'`);
}

/** Where the consumer writes, for its start line: the database without credentials, and the schema. */
function target(): string {
  const url = new URL(settings.databaseUrl);
  return `${url.hostname}:${url.port || '5432'}${url.pathname}, schema ${settings.schema}`;
}

/** schema.sql sits beside this file, or one folder up once compiled into dist/. */
function schemaFile(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const found = [join(here, 'schema.sql'), join(here, '..', 'schema.sql')].find((p) => existsSync(p));
  if (!found) throw new Error(`schema.sql not found next to ${here}`);
  return found;
}
