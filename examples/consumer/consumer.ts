// A consumer of feedsync's jobs: it records what happened to your messages in your
// own tables, once per event, however often a job runs. It never sends mail: a bounce
// or a complaint is recorded, and whether to send anything is decided elsewhere.
//
//   npx tsc -p examples/consumer && node examples/consumer/dist/consumer.js
//
// Environment (the queue settings have feedsync's names and defaults, so that it reads
// the jobs the worker writes): REDIS_URL, QUEUE_PREFIX, QUEUE_EMAIL_EVENTS,
// QUEUE_CONTACT_EVENTS; APP_DATABASE_URL (your database) and APP_SCHEMA (default
// `feedsync_example_consumer`), where schema.sql is applied at start. The schema is
// marked as the example's: one that exists without the mark (your application's own,
// say) is refused, never written into. examples/consumer/README.md says more.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Job, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import pg from 'pg';

/** The data of every job feedsync adds: the event as the service sent it. */
interface FeedEvent {
  source: string;
  id: string;
  type: string;
  created_at: string;
  data: Record<string, unknown>;
}

const env = process.env;
const settings = {
  redisUrl: env.REDIS_URL || 'redis://127.0.0.1:6379',
  prefix: env.QUEUE_PREFIX || 'bull',
  emailQueue: env.QUEUE_EMAIL_EVENTS || 'email-events',
  contactQueue: env.QUEUE_CONTACT_EVENTS || 'contact-events',
  databaseUrl: env.APP_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres',
  schema: env.APP_SCHEMA || 'feedsync_example_consumer',
};
if (!/^[a-z_][a-z0-9_]{0,62}$/.test(settings.schema)) {
  console.error('APP_SCHEMA: must be a lowercase SQL identifier');
  process.exit(2);
}

/** The comment that marks a schema as this example's. */
const MARK = 'feedsync example consumer';

const db = new pg.Pool({
  connectionString: settings.databaseUrl,
  options: `-c search_path=${settings.schema}`,
});
await claimSchema();
await db.query(readFileSync(schemaFile(), 'utf8'));

/**
 * Creates the schema and marks it, or takes an empty one, or one marked before. A schema
 * that holds anything else is not the example's to write into: exit 2.
 */
async function claimSchema(): Promise<void> {
  const found = await db.query<{ mark: string | null; tables: string }>(
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
    await db.end();
    process.exit(2);
  }
  await db.query(`CREATE SCHEMA IF NOT EXISTS ${settings.schema}`);
  await db.query(`COMMENT ON SCHEMA ${settings.schema} IS '${MARK}'`);
}

/** Where the consumer writes, for its start line: the database without credentials, and the schema. */
function target(): string {
  const url = new URL(settings.databaseUrl);
  return `${url.hostname}:${url.port || '5432'}${url.pathname}, schema ${settings.schema}`;
}

/** Runs one job's event in one transaction, unless its key was recorded before. */
async function handle(job: Job<FeedEvent>): Promise<void> {
  const event = job.data;
  // The job id is feedsync's `source/event id`: unique per event, the same on every run.
  const key = job.id ?? `${encodeURIComponent(event.source)}/${encodeURIComponent(event.id)}`;
  const client = await db.connect();
  try {
    await client.query('BEGIN');
    const first = await client.query(
      'INSERT INTO processed_events (event_key, type) VALUES ($1, $2) ON CONFLICT DO NOTHING',
      [key, event.type],
    );
    if (first.rowCount === 1) await apply(client, key, event);
    await client.query('COMMIT');
    // One line per job: its key, type and email id, never an address.
    const about = typeof event.data.email_id === 'string' ? ` ${event.data.email_id}` : '';
    console.log(
      `${key} ${event.type}${about}: ${first.rowCount === 1 ? 'recorded' : 'seen before, unchanged'}`,
    );
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err; // BullMQ retries the job (JOB_ATTEMPTS, JOB_BACKOFF_MS on the feedsync side).
  } finally {
    client.release();
  }
}

async function apply(client: pg.PoolClient, key: string, event: FeedEvent): Promise<void> {
  const { data } = event;
  if (event.type.startsWith('email.') && typeof data.email_id === 'string') {
    // Events may come in any order: an older one never overwrites a newer state. Two
    // events of the same instant (a retried email.sent beside its email.delivered) are
    // ordered by rank, as feedsync's email_status does, then by event id.
    await client.query(
      `INSERT INTO messages (source, email_id, last_event, last_event_rank, last_event_id, last_event_at)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (source, email_id) DO UPDATE SET last_event = EXCLUDED.last_event,
         last_event_rank = EXCLUDED.last_event_rank, last_event_id = EXCLUDED.last_event_id,
         last_event_at = EXCLUDED.last_event_at
       WHERE (messages.last_event_at, messages.last_event_rank, messages.last_event_id)
           < (EXCLUDED.last_event_at, EXCLUDED.last_event_rank, EXCLUDED.last_event_id)`,
      [event.source, data.email_id, event.type, rankOf(event.type), event.id, event.created_at],
    );
    if (event.type === 'email.bounced' || event.type === 'email.complained') {
      const to = Array.isArray(data.to) ? data.to.filter((a): a is string => typeof a === 'string') : [];
      await client.query(
        `INSERT INTO suppressed_addresses (address, reason, event_key, since)
         SELECT lower(a), $2, $3, $4 FROM unnest($1::text[]) AS a ON CONFLICT (address) DO NOTHING`,
        [to, event.type, key, event.created_at],
      );
    }
  } else if (event.type.startsWith('contact.') && typeof data.email === 'string') {
    await client.query(
      `INSERT INTO subscriptions (address, subscribed, changed_at) VALUES (lower($1), $2, $3)
       ON CONFLICT (address) DO UPDATE SET subscribed = EXCLUDED.subscribed, changed_at = EXCLUDED.changed_at
       WHERE subscriptions.changed_at <= EXCLUDED.changed_at`,
      [data.email, event.type === 'contact.subscribed', event.created_at],
    );
  }
}

/**
 * How far along a message an event says it is, as feedsync's email_status ranks them:
 * a complaint comes after the delivery, a bounce or a failure after the send. Other
 * email.* types rank below every one of these.
 */
function rankOf(type: string): number {
  const ranks: Record<string, number> = {
    'email.sent': 1,
    'email.delivered': 2,
    'email.bounced': 3,
    'email.failed': 3,
    'email.complained': 4,
  };
  return ranks[type] ?? 0;
}

/** schema.sql sits beside this file, or one folder up once compiled into dist/. */
function schemaFile(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const found = [join(here, 'schema.sql'), join(here, '..', 'schema.sql')].find((p) => existsSync(p));
  if (!found) throw new Error(`schema.sql not found next to ${here}`);
  return found;
}

// BullMQ's workers block on Redis: their connection must not give up on a command.
const redis = new Redis(settings.redisUrl, { maxRetriesPerRequest: null });
const workers = [settings.emailQueue, settings.contactQueue].map((queue) => {
  const worker = new Worker<FeedEvent>(queue, handle, { connection: redis, prefix: settings.prefix });
  worker.on('failed', (job, err) => console.error(`job ${job?.id ?? '?'} failed: ${err.message}`));
  worker.on('error', (err) => console.error(`worker ${queue}: ${err.message}`));
  return worker;
});
console.log(
  `consuming ${settings.emailQueue} and ${settings.contactQueue} (prefix ${settings.prefix}) into ${target()}`,
);

// SIGTERM or Ctrl-C: finish the jobs in hand, then leave.
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    void Promise.all(workers.map((w) => w.close()))
      .then(() => db.end())
      .then(() => redis.quit())
      .then(() => process.exit(0));
  });
}
