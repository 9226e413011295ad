import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { FeedsyncError } from '../../src/errors.js';
import { createStore, type Store } from '../../src/store/db.js';
import { migrate, schemaState } from '../../src/store/migrate.js';
import { migrationNames } from '../../src/store/migration-files.js';
import { suppressionsAmong } from '../../src/store/suppressions.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../', import.meta.url));
/** Every migration in migrations/, in order, and the newest. */
const ALL = await migrationNames();
const LATEST = ALL.at(-1);
const schemas: string[] = [];
const stores: Store[] = [];
const temps: string[] = [];

function newStore(schema: string): Store {
  const store = createStore({ url: TEST_DATABASE_URL, schema, max: 2 });
  stores.push(store);
  return store;
}

function freshSchema(label: string): string {
  const schema = uniqueSchema(label);
  schemas.push(schema);
  return schema;
}

async function tables(store: Store): Promise<string[]> {
  const { rows } = await store.pool.query<{ table_name: string }>(
    'SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name',
    [store.schema],
  );
  return rows.map((r) => r.table_name);
}

afterAll(async () => {
  for (const store of stores) await store.close();
  for (const schema of schemas) await dropSchema(schema);
  for (const dir of temps) await rm(dir, { recursive: true, force: true });
});

describe('migrate', () => {
  it('creates every table in the schema, migrator tables included, and is a no-op the second time', async () => {
    const store = newStore(freshSchema('mig_twice'));
    expect(await schemaState(store)).toEqual({ current: null, latest: LATEST, pending: ALL });

    expect(await migrate(store)).toEqual({ applied: ALL });
    expect(await tables(store)).toEqual(
      expect.arrayContaining([
        'conflicts',
        'cursors',
        'email_status',
        'events',
        'kysely_migration',
        'kysely_migration_lock',
        'outbox',
        'quarantine',
      ]),
    );
    expect(await schemaState(store)).toEqual({ current: LATEST, latest: LATEST, pending: [] });

    expect(await migrate(store)).toEqual({ applied: [] });
  });

  it('is safe when two stores run it at once: one applies, the other finds nothing to do', async () => {
    const schema = freshSchema('mig_concurrent');
    const results = await Promise.all([migrate(newStore(schema)), migrate(newStore(schema))]);
    expect(results.map((r) => r.applied).sort()).toEqual([[], ALL]);
    expect(await schemaState(newStore(schema))).toMatchObject({ pending: [] });
  });

  it('is safe when two processes run it at once', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'feedsync-migrate-'));
    temps.push(dir);
    // Build the store module into dir/dist, next to links to migrations/ and node_modules/,
    // the same layout as the published package.
    const tsc = createRequire(import.meta.url).resolve('typescript/lib/tsc.js');
    await run(process.execPath, [
      tsc,
      ...['--outDir', join(dir, 'dist'), '--rootDir', join(root, 'src'), '--module', 'node16'],
      ...['--moduleResolution', 'node16', '--target', 'ES2023', '--skipLibCheck', '--types', 'node'],
      join(root, 'src/store/db.ts'),
      join(root, 'src/store/migrate.ts'),
    ]);
    await symlink(join(root, 'migrations'), join(dir, 'migrations'));
    await symlink(join(root, 'node_modules'), join(dir, 'node_modules'));

    const schema = freshSchema('mig_processes');
    const db = pathToFileURL(join(dir, 'dist/store/db.js')).href;
    const migrations = pathToFileURL(join(dir, 'dist/store/migrate.js')).href;
    const script = `
      import { createStore } from ${JSON.stringify(db)};
      import { migrate } from ${JSON.stringify(migrations)};
      const store = createStore({ url: ${JSON.stringify(TEST_DATABASE_URL)}, schema: ${JSON.stringify(schema)} });
      try { process.stdout.write(JSON.stringify(await migrate(store))); } finally { await store.close(); }`;
    const child = () => run(process.execPath, ['--input-type=module', '-e', script], { timeout: 20_000 });
    const outputs = await Promise.all([child(), child(), child()]);
    const applied = outputs.map((o) => (JSON.parse(o.stdout) as { applied: string[] }).applied);
    expect(applied.flat()).toEqual(ALL);
    expect(await tables(newStore(schema))).toContain('events');
  });

  it('throws on a failed migration, keeps nothing of it, and reports it as pending', async () => {
    const folder = await mkdtemp(join(tmpdir(), 'feedsync-migrations-'));
    temps.push(folder);
    const folderUrl = pathToFileURL(`${folder}/`);
    await copyFile(join(root, 'migrations/0001_init.sql'), join(folder, '0001_init.sql'));
    await mkdir(join(folder, 'ignored-folder'));
    await writeFile(join(folder, 'README.md'), 'not a migration');

    const store = newStore(freshSchema('mig_fail'));
    expect(await migrate(store, { folder: folderUrl })).toEqual({ applied: ['0001_init'] });

    await writeFile(join(folder, '0002_broken.sql'), 'CREATE TABLE half_done (x int);\nSELECT 1 / 0;\n');
    expect(await schemaState(store, { folder: folderUrl })).toEqual({
      current: '0001_init',
      latest: '0002_broken',
      pending: ['0002_broken'],
    });
    const failure = await migrate(store, { folder: folderUrl }).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(FeedsyncError);
    expect(failure).toMatchObject({ code: 'MIGRATION_FAILED' });
    expect((failure as Error).message).toMatch(/0002_broken.*division by zero/);
    expect(await tables(store)).not.toContain('half_done');
    expect(await schemaState(store, { folder: folderUrl })).toMatchObject({ pending: ['0002_broken'] });
    // The failed run gave its connection back without the schema lock: another run proceeds.
    await writeFile(join(folder, '0002_broken.sql'), 'CREATE TABLE half_done (x int);\n');
    expect(await migrate(store, { folder: folderUrl })).toEqual({ applied: ['0002_broken'] });
  });

  it('0011 puts leases.source, source_counts.source and cursors.after_id in the "C" collation, rows, keys and indexes kept', async () => {
    const folder = await mkdtemp(join(tmpdir(), 'feedsync-migrations-'));
    temps.push(folder);
    const before = ALL.filter((name) => name < '0011');
    for (const name of before)
      await copyFile(join(root, `migrations/${name}.sql`), join(folder, `${name}.sql`));
    const store = newStore(freshSchema('mig_collation'));
    const s = store.schema;
    expect(await migrate(store, { folder: pathToFileURL(`${folder}/`) })).toEqual({ applied: before });
    await store.pool.query(
      `INSERT INTO ${s}.leases (source, holder, token) VALUES ('b', 'h:1', 3), ('B', NULL, 0)`,
    );
    await store.pool.query(
      `INSERT INTO ${s}.source_counts (source, events_stored) VALUES ('b', 5), ('B', 7)`,
    );
    await store.pool.query(`INSERT INTO ${s}.cursors (source, after_id) VALUES ('b', 'evt_1')`);

    expect((await migrate(store)).applied).toContain('0011_identifier_collation');
    const { rows: collations } = await store.pool.query(
      `SELECT table_name, column_name, collation_name FROM information_schema.columns
        WHERE table_schema = $1 AND column_name IN ('source', 'after_id')
          AND table_name IN ('leases', 'source_counts', 'cursors') ORDER BY table_name, column_name`,
      [s],
    );
    expect(collations).toEqual([
      { table_name: 'cursors', column_name: 'after_id', collation_name: 'C' },
      { table_name: 'cursors', column_name: 'source', collation_name: 'C' },
      { table_name: 'leases', column_name: 'source', collation_name: 'C' },
      { table_name: 'source_counts', column_name: 'source', collation_name: 'C' },
    ]);
    const { rows: leases } = await store.pool.query(
      `SELECT source, holder, token::int FROM ${s}.leases ORDER BY source`,
    );
    expect(leases).toEqual([
      { source: 'B', holder: null, token: 0 },
      { source: 'b', holder: 'h:1', token: 3 },
    ]);
    const { rows: counts } = await store.pool.query(
      `SELECT source, events_stored::int AS n FROM ${s}.source_counts ORDER BY source`,
    );
    expect(counts).toEqual([
      { source: 'B', n: 7 },
      { source: 'b', n: 5 },
    ]);
    const { rows: cursors } = await store.pool.query(`SELECT after_id FROM ${s}.cursors`);
    expect(cursors).toEqual([{ after_id: 'evt_1' }]);
    await expect(store.pool.query(`INSERT INTO ${s}.leases (source) VALUES ('b')`)).rejects.toMatchObject({
      code: '23505',
    });
    const { rows: indexes } = await store.pool.query<{ name: string; valid: boolean }>(
      `SELECT c.relname AS name, i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid IN ($1::regclass, $2::regclass) ORDER BY c.relname`,
      [`${s}.leases`, `${s}.source_counts`],
    );
    expect(indexes).toEqual([
      { name: 'leases_next_at_idx', valid: true },
      { name: 'leases_pkey', valid: true },
      { name: 'source_counts_pkey', valid: true },
    ]);
  });

  it('0012 re-keys contact_status and suppressions, merging spellings, and stands every unsubscribe again', async () => {
    const folder = await mkdtemp(join(tmpdir(), 'feedsync-migrations-'));
    temps.push(folder);
    const before = ALL.filter((name) => name < '0012');
    for (const name of before)
      await copyFile(join(root, `migrations/${name}.sql`), join(folder, `${name}.sql`));
    const store = newStore(freshSchema('mig_send_guard'));
    const s = store.schema;
    await migrate(store, { folder: pathToFileURL(`${folder}/`) });
    // As the old statement left them: keys trimmed of ASCII only, one suppression per
    // address (its highest reason), a subscribe dated 2099 standing over a real unsubscribe.
    await store.pool.query(
      `INSERT INTO ${s}.contact_status (source, email, status, last_event_id, last_event_at) VALUES
        ('d', 'ivan@example.com', 'unsubscribed', 'u1', '2024-01-01'),
        ('d', 'erin@example.com\u00a0', 'subscribed', 's1', '2024-01-02'),
        ('d', 'erin@example.com', 'unsubscribed', 'u2', '2024-01-03'),
        ('d', 'kay@example.com', 'subscribed', 'f1', '2099-01-01')`,
    );
    await store.pool.query(
      `INSERT INTO ${s}.events (source, id, type, created_at, data, received_via) VALUES
        ('d', 'f1', 'contact.subscribed', '2099-01-01', '{"email": "kay@example.com"}', 'feed'),
        ('d', 'u3', 'contact.unsubscribed', '2024-01-04', '{"email": "Kay@example.com"}', 'feed')`,
    );
    await store.pool.query(
      `INSERT INTO ${s}.suppressions (source, address, reason, event_id, at) VALUES
        ('d', 'ivan@example.com', 'bounced', 'b1', '2024-01-05'),
        ('d', 'gre\u0301g@example.com', 'bounced', 'b2', '2024-01-06'),
        ('d', 'gr\u00e9g@example.com', 'bounced', 'b3', '2024-01-07')`,
    );
    expect((await migrate(store)).applied).toContain('0012_send_guard');
    const { rows: contacts } = await store.pool.query(
      `SELECT email, status, last_event_id FROM ${s}.contact_status ORDER BY email`,
    );
    expect(contacts).toEqual([
      { email: 'erin@example.com', status: 'unsubscribed', last_event_id: 'u2' },
      { email: 'ivan@example.com', status: 'unsubscribed', last_event_id: 'u1' },
      { email: 'kay@example.com', status: 'unsubscribed', last_event_id: 'u3' },
    ]);
    const { rows: suppressions } = await store.pool.query(
      `SELECT address, reason, event_id FROM ${s}.suppressions ORDER BY address, reason`,
    );
    expect(suppressions).toEqual([
      { address: 'erin@example.com', reason: 'unsubscribed', event_id: 'u2' },
      { address: 'gr\u00e9g@example.com', reason: 'bounced', event_id: 'b2' },
      { address: 'ivan@example.com', reason: 'bounced', event_id: 'b1' },
      { address: 'ivan@example.com', reason: 'unsubscribed', event_id: 'u1' },
      { address: 'kay@example.com', reason: 'unsubscribed', event_id: 'u3' },
    ]);
  });

  it('0014 keys stored rows by mailbox and ranks a contact dated ahead at its arrival', async () => {
    const folder = await mkdtemp(join(tmpdir(), 'feedsync-migrations-'));
    temps.push(folder);
    for (const name of ALL.filter((n) => n < '0014'))
      await copyFile(join(root, `migrations/${name}.sql`), join(folder, `${name}.sql`));
    const store = newStore(freshSchema('mig_mailboxes'));
    const s = store.schema;
    await migrate(store, { folder: pathToFileURL(`${folder}/`) });
    // As version 13 keyed them: address_key() of the whole value as the event gave it.
    const old = [
      'person@example.com.',
      'Bob <bob@example.com>',
      'carol@example.com, dave@example.com',
      'wide@\uff25xample\u3002com',
      'mark@exa\u034fmple.com',
      'idn@B\u00dccher.example',
    ];
    await store.pool.query(
      `INSERT INTO ${s}.suppressions (source, address, reason, event_id, at)
        SELECT 'd', ${s}.address_key(a), 'bounced', 'b' || n, '2024-01-01' FROM unnest($1::text[]) WITH ORDINALITY AS t(a, n)`,
      [old],
    );
    await store.pool.query(
      `INSERT INTO ${s}.contact_status (source, email, status, last_event_id, last_event_at, ranked_at, updated_at) VALUES
        ('d', 'ann@example.com.', 'subscribed', 's1', '2024-01-01 00:04+00', '2024-01-01 00:04+00', '2024-01-01 00:00+00'),
        ('d', 'ann@example.com', 'unsubscribed', 'u1', '2023-12-01', '2023-12-01', '2023-12-01')`,
    );
    // 0014, and whatever later versions the repository has.
    expect((await migrate(store)).applied).toEqual(ALL.filter((n) => n >= '0014'));
    const found = await suppressionsAmong(store, 'd', [
      'person@example.com',
      'bob@example.com',
      'carol@example.com',
      'dave@example.com',
      'wide@example.com',
      'mark@example.com',
      'idn@xn--bcher-kva.example',
    ]);
    expect(found.map((f) => f.address)).toEqual([
      'bob@example.com',
      'carol@example.com',
      'dave@example.com',
      'idn@b\u00fccher.example',
      'mark@example.com',
      'person@example.com',
      'wide@example.com',
    ]);
    const { rows } = await store.pool.query(`SELECT email, status, ranked_at FROM ${s}.contact_status`);
    expect(rows).toEqual([
      { email: 'ann@example.com', status: 'subscribed', ranked_at: new Date('2024-01-01T00:00:00Z') },
    ]);
  });

  it('refuses a schema name that is not a plain lowercase identifier', () => {
    expect(() => createStore({ url: TEST_DATABASE_URL, schema: 'Bad"; DROP' })).toThrow(/identifier/);
  });
});
