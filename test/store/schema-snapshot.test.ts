import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateInbox } from '../../src/consumer/inbox.js';
import type { Database, Store } from '../../src/store/db.js';
import { dropSchema, uniqueSchema } from '../support/postgres.js';
import { migratedStore } from './migrated-store.js';

/**
 * The schema that migrations/ makes, read back from the catalog, against a committed
 * text (schema.snapshot.txt) and against the kysely types in src/store/db.ts. A
 * migration that changes the schema changes the text: the diff shows what it did, and
 * the types are held to every table and column. After a deliberate change:
 * `npx vitest run test/store/schema-snapshot.test.ts -u` writes the text anew.
 */

/** The migrator's own tables (kysely's), which no migration makes and Database does not name. */
const MIGRATOR_TABLES = ['kysely_migration', 'kysely_migration_lock'];

/**
 * Every column of every table in Database. Typed from Database, so the compiler refuses
 * a table or column missing here or extra; the test below compares it with the catalog.
 */
const COLUMNS: { [T in keyof Database]-?: { [C in keyof Database[T]]-?: true } } = {
  request_budgets: { account: true, next_at: true },
  events: {
    source: true,
    id: true,
    type: true,
    created_at: true,
    data: true,
    received_via: true,
    received_at: true,
  },
  cursors: {
    source: true,
    after_id: true,
    types: true,
    updated_at: true,
    last_success_at: true,
    key_kind: true,
    check_before: true,
    check_digest: true,
  },
  leases: {
    source: true,
    holder: true,
    token: true,
    expires_at: true,
    due_at: true,
    failures: true,
    last_error: true,
    taken_at: true,
    last_turn: true,
  },
  source_counts: { source: true, events_stored: true, newest_event_at: true },
  email_status: {
    source: true,
    email_id: true,
    status: true,
    last_event_id: true,
    last_event_at: true,
    sent_at: true,
    delivered_at: true,
    bounced_at: true,
    complained_at: true,
    failed_at: true,
    recipients: true,
    recipients_event_id: true,
    recipients_event_at: true,
    updated_at: true,
  },
  contact_status: {
    source: true,
    email: true,
    status: true,
    last_event_id: true,
    last_event_at: true,
    ranked_at: true,
    updated_at: true,
  },
  suppressions: { source: true, address: true, reason: true, event_id: true, at: true, updated_at: true },
  outbox: {
    seq: true,
    source: true,
    event_id: true,
    queue: true,
    job_name: true,
    payload: true,
    created_at: true,
    published_at: true,
  },
  quarantine: { id: true, source: true, raw: true, raw_sha256: true, reason: true, received_at: true },
  conflicts: {
    id: true,
    source: true,
    event_id: true,
    first_sha256: true,
    second_sha256: true,
    raw: true,
    received_via: true,
    received_at: true,
    versions_seen: true,
  },
  retired_sources: { source: true, renamed_to: true, retired_at: true },
  verify_runs: {
    source: true,
    finished_at: true,
    missing: true,
    differing: true,
    repaired: true,
    checked: true,
    ok: true,
  },
};

interface TableShape {
  name: string;
  /** Storage parameters (ALTER TABLE … SET), e.g. autovacuum settings. */
  options: string[];
  /** One line per column, in the table's order: name, type, collation, NOT NULL, default. */
  columns: { name: string; line: string }[];
  /** `name definition`, by name; NOT NULL is on the column's line. */
  constraints: string[];
  /** CREATE INDEX statements, by index name. */
  indexes: string[];
}

/**
 * What the schema holds, as text with its name taken out. `objects` is every object in
 * the schema (tables, sequences, views, functions, types: whatever a migration might
 * make), the migrator's tables aside; `tables` the tables in detail.
 */
async function readSchema(
  store: Pick<Store, 'pool' | 'schema'>,
): Promise<{ objects: string[]; tables: TableShape[] }> {
  // Without the schema's name, on one line (Postgres prints a CASE over several).
  const unnamed = (text: string): string => text.replaceAll(`${store.schema}.`, '').replace(/\s+/g, ' ');
  const query = async <R extends object>(text: string, values: unknown[]): Promise<R[]> =>
    (await store.pool.query<R>(text, values)).rows;

  const objects = await query<{ object: string }>(
    `SELECT pg_describe_object(d.classid, d.objid, d.objsubid) AS object
       FROM pg_depend d JOIN pg_namespace n ON n.oid = d.refobjid
      WHERE d.refclassid = 'pg_namespace'::regclass AND n.nspname = $1
        AND NOT (d.classid = 'pg_class'::regclass AND d.objid IN (
          SELECT c.oid FROM pg_class c WHERE c.relnamespace = n.oid AND c.relname = ANY ($2::text[])))`,
    [store.schema, MIGRATOR_TABLES],
  );
  const tables = await query<{ oid: number; name: string; options: string[] | null }>(
    `SELECT c.oid, c.relname AS name, c.reloptions AS options
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND NOT (c.relname = ANY ($2::text[]))
      ORDER BY c.relname`,
    [store.schema, MIGRATOR_TABLES],
  );
  const shapes: TableShape[] = [];
  for (const table of tables) {
    const columns = await query<{ name: string; line: string }>(
      `SELECT a.attname AS name, concat_ws(' ', quote_ident(a.attname), format_type(a.atttypid, a.atttypmod),
           CASE WHEN a.attcollation NOT IN (0, t.typcollation) THEN 'COLLATE ' || quote_ident(co.collname) END,
           CASE WHEN a.attnotnull THEN 'NOT NULL' END,
           CASE a.attidentity WHEN 'a' THEN 'GENERATED ALWAYS AS IDENTITY'
                              WHEN 'd' THEN 'GENERATED BY DEFAULT AS IDENTITY' END,
           CASE WHEN a.attgenerated = 's' THEN 'GENERATED ALWAYS AS (' || pg_get_expr(d.adbin, d.adrelid) || ') STORED'
                WHEN d.adbin IS NOT NULL THEN 'DEFAULT ' || pg_get_expr(d.adbin, d.adrelid) END) AS line
         FROM pg_attribute a
         JOIN pg_type t ON t.oid = a.atttypid
         LEFT JOIN pg_collation co ON co.oid = a.attcollation
         LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped
        ORDER BY a.attnum`,
      [table.oid],
    );
    const constraints = await query<{ line: string }>(
      `SELECT conname || ' ' || pg_get_constraintdef(oid) AS line FROM pg_constraint
        WHERE conrelid = $1 AND contype <> 'n' ORDER BY conname`,
      [table.oid],
    );
    const indexes = await query<{ line: string }>(
      `SELECT pg_get_indexdef(i.indexrelid) AS line FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = $1 ORDER BY c.relname`,
      [table.oid],
    );
    shapes.push({
      name: table.name,
      options: table.options ?? [],
      columns: columns.map((c) => ({ name: c.name, line: unnamed(c.line) })),
      constraints: constraints.map((c) => unnamed(c.line)),
      indexes: indexes.map((i) => unnamed(i.line)),
    });
  }
  return { objects: objects.map((o) => unnamed(o.object)).sort(), tables: shapes };
}

/** The committed text: one block per table, each line indented under its table. */
function snapshotText(
  schema: { objects: string[]; tables: TableShape[] },
  header = [
    '-- The schema migrations/ makes, read from the catalog by test/store/schema-snapshot.test.ts.',
    '-- Not to be edited: after a new migration, `npx vitest run test/store/schema-snapshot.test.ts -u`.',
  ],
): string {
  const lines = [...header, '', ...schema.objects];
  for (const table of schema.tables) {
    lines.push('', `TABLE ${table.name}`);
    for (const column of table.columns) lines.push(`  ${column.line}`);
    for (const constraint of table.constraints) lines.push(`  CONSTRAINT ${constraint}`);
    for (const index of table.indexes) lines.push(`  ${index}`);
    for (const option of table.options) lines.push(`  WITH ${option}`);
  }
  return `${lines.join('\n')}\n`;
}

let store: Store;
let dispose: () => Promise<void>;
let schema: { objects: string[]; tables: TableShape[] };
beforeAll(async () => {
  ({ store, dispose } = await migratedStore('schema_snapshot'));
  schema = await readSchema(store);
});
afterAll(async () => {
  await dispose();
});

describe('the migrated schema', () => {
  it('is the committed snapshot', async () => {
    await expect(snapshotText(schema)).toMatchFileSnapshot('./schema.snapshot.txt');
  });

  it('has the tables and columns of the kysely types, no more and no fewer', () => {
    const inCatalog = Object.fromEntries(
      schema.tables.map((t) => [t.name, t.columns.map((c) => c.name).sort()]),
    );
    const inTypes = Object.fromEntries(
      Object.entries(COLUMNS).map(([table, columns]) => [table, Object.keys(columns).sort()]),
    );
    expect(inTypes).toEqual(inCatalog);
  });

  it('keeps every identifier (a source, an id, an address) in the "C" collation', () => {
    const identifiers = schema.tables.flatMap((t) =>
      t.columns
        .filter((c) => /^(source|id|email|address)$|_id$/.test(c.name))
        .filter((c) => c.line.split(' ')[1] === 'text')
        .map((c) => `${t.name}.${c.line}`),
    );
    expect(identifiers.filter((line) => !line.includes('COLLATE "C"'))).toEqual([]);
  });
});

describe("the consumer's inbox table", () => {
  // The consumer's own data layer (src/consumer/statements.ts), made by migrate() in the
  // application's database rather than by migrations/: held to a text of its own.
  it('is the committed snapshot', async () => {
    const inboxSchema = uniqueSchema('inbox_snapshot');
    try {
      await migrateInbox(store.pool, inboxSchema);
      const text = snapshotText(await readSchema({ pool: store.pool, schema: inboxSchema }), [
        "-- The table feedsync/consumer's migrate() makes, read from the catalog by test/store/schema-snapshot.test.ts.",
        '-- Not to be edited: after a change to src/consumer/statements.ts, `npx vitest run test/store/schema-snapshot.test.ts -u`.',
      ]);
      await expect(text).toMatchFileSnapshot('./inbox.snapshot.txt');
    } finally {
      await dropSchema(inboxSchema);
    }
  });
});
