import type pg from 'pg';
import { ConfigError } from '../errors.js';
import { quoteSchema, type Store } from './db.js';

/*
 * The statements of `feedsync demo` (src/cli/demo.ts, demo-consumer.ts, src/queue/demo-queues.ts),
 * all on the demo's schema: `store.schema`, a checked lowercase identifier (or, with the
 * queues in Postgres, the queues' schema).
 */

/** Written on what the demo makes (its schema's comment, a key under its prefix): it drops no other. */
export const DEMO_MARK = 'made by feedsync demo; dropped by its next run';

/**
 * Reads pg_namespace and pg_class, writes nothing: whether the schema exists (null: it
 * does not), bears the demo's mark (markDemoSchema), and how many relations (tables,
 * sequences, indexes, …) it holds.
 */
export async function demoSchemaState(
  store: Pick<Store, 'pool' | 'schema'>,
): Promise<{ marked: boolean; relations: number } | null> {
  const { rows } = await store.pool.query<{ mark: string | null; relations: number }>(
    `SELECT obj_description(n.oid, 'pg_namespace') AS mark,
            (SELECT count(*)::int FROM pg_class c WHERE c.relnamespace = n.oid) AS relations
       FROM pg_namespace n WHERE n.nspname = $1`,
    [store.schema],
  );
  const found = rows[0];
  return found ? { marked: found.mark === DEMO_MARK, relations: found.relations } : null;
}

/**
 * Drops the demo's schema (`store.schema`) so that it starts afresh, unless the schema
 * holds tables the demo did not make (DATABASE_SCHEMA naming a real one, say): then
 * nothing is dropped and the demo stops (exit 2). Call markDemoSchema after migrating.
 */
export async function dropOwnDemoSchema(
  store: Pick<Store, 'pool' | 'schema'>,
  variable = 'DATABASE_SCHEMA',
  fallback = 'feedsync_demo',
): Promise<void> {
  await refuseForeignSchema(store, variable, fallback);
  await dropDemoSchema(store);
}

/** Refuses (DEMO_REFUSED) a schema that holds tables the demo did not make; drops nothing. */
export async function refuseForeignSchema(
  store: Pick<Store, 'pool' | 'schema'>,
  variable = 'DATABASE_SCHEMA',
  fallback = 'feedsync_demo',
): Promise<void> {
  const found = await demoSchemaState(store);
  if (found && found.relations > 0 && !found.marked) {
    throw new ConfigError(
      `demo: schema "${store.schema}" holds tables the demo did not make, and the demo drops only its own; ` +
        `set ${variable} to another name (or leave it unset for ${fallback})`,
      'DEMO_REFUSED',
    );
  }
}

/** Drops the schema and everything in it, if it exists. */
export async function dropDemoSchema(store: Pick<Store, 'pool' | 'schema'>): Promise<void> {
  await store.pool.query(`DROP SCHEMA IF EXISTS ${quoteSchema(store.schema)} CASCADE`);
}

/** Writes the demo's mark as the schema's comment, for demoSchemaState. */
export async function markDemoSchema(store: Pick<Store, 'pool' | 'schema'>): Promise<void> {
  await store.pool.query(`COMMENT ON SCHEMA ${quoteSchema(store.schema)} IS '${DEMO_MARK}'`);
}

export interface DemoTables {
  /** Every event by id, with its email_id or contact email ('' without). */
  events: { id: string; type: string; who: string }[];
  emailStatus: { email_id: string; status: string; recipients: string[] }[];
  contactStatus: { email: string; status: string }[];
  suppressions: { address: string; reason: string; event_id: string }[];
}

/** Reads events, email_status, contact_status and suppressions, writes nothing: what the demo prints. */
export async function demoTables(store: Store): Promise<DemoTables> {
  const s = quoteSchema(store.schema);
  const rows = async <R extends object>(text: string): Promise<R[]> => (await store.pool.query<R>(text)).rows;
  return {
    events: await rows(
      `SELECT id, type, coalesce(data->>'email_id', data->>'email', '') AS who FROM ${s}.events ORDER BY id`,
    ),
    emailStatus: await rows(`SELECT email_id, status, recipients FROM ${s}.email_status ORDER BY email_id`),
    contactStatus: await rows(`SELECT email, status FROM ${s}.contact_status ORDER BY email`),
    suppressions: await rows(`SELECT address, reason, event_id FROM ${s}.suppressions ORDER BY address`),
  };
}

/**
 * Creates app_events in the schema if missing: the demo consumer's own table, as an
 * application would keep. No unique key: a second effect of one event would be a second
 * row, which the demo counts.
 */
export async function createAppEvents(store: Store): Promise<void> {
  await store.pool.query(
    `CREATE TABLE IF NOT EXISTS ${quoteSchema(store.schema)}.app_events (source text, event_id text, type text, email_id text)`,
  );
}

/**
 * Inserts one row into app_events: one event's effect. `client` the consumer's
 * connection, in the transaction that records the job in its inbox; `schema` the
 * demo's; `event` the job's source, event id, type and email_id (null for a contact
 * event).
 */
export async function recordAppEvent(
  client: Pick<pg.ClientBase, 'query'>,
  schema: string,
  event: { source: string; id: string; type: string; emailId: string | null },
): Promise<void> {
  await client.query(`INSERT INTO ${quoteSchema(schema)}.app_events VALUES ($1, $2, $3, $4)`, [
    event.source,
    event.id,
    event.type,
    event.emailId,
  ]);
}

/** Reads app_events, writes nothing: its rows counted by event type. */
export async function appEventsByType(store: Store): Promise<Map<string, number>> {
  const { rows } = await store.pool.query<{ type: string; n: number }>(
    `SELECT type, count(*)::int AS n FROM ${quoteSchema(store.schema)}.app_events GROUP BY type ORDER BY type`,
  );
  return new Map(rows.map((r) => [r.type, r.n]));
}
