import { afterAll, beforeAll, expect, it } from 'vitest';
import { createApplier } from '../../src/store/applier.js';
import { createStore, type Store } from '../../src/store/db.js';
import { TEST_DATABASE_URL } from '../support/postgres.js';
import { event, migratedStore, route } from './migrated-store.js';

let store: Store;
let timed: Store;
let dispose: () => Promise<void>;
const TIMEOUT_MS = 1_500;

beforeAll(async () => {
  ({ store, dispose } = await migratedStore('stmt_timeout'));
  const s = `"${store.schema}"`;
  // Storing takes 40 ms per event: 100 events (4 s) cannot commit within the timeout, 12 (0.5 s) can.
  await store.pool.query(`
    CREATE FUNCTION ${s}.slow() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM pg_sleep(0.04 * (SELECT count(*) FROM added)); RETURN NULL; END $$;
    CREATE TRIGGER slow AFTER INSERT ON ${s}.events REFERENCING NEW TABLE AS added
      FOR EACH STATEMENT EXECUTE FUNCTION ${s}.slow();`);
  const url = new URL(TEST_DATABASE_URL);
  url.searchParams.set('options', `-c statement_timeout=${TIMEOUT_MS}`);
  timed = createStore({ url: url.toString(), schema: store.schema });
});
afterAll(async () => {
  await timed.close();
  await dispose();
});

it('a page that cannot commit within statement_timeout is committed in smaller parts, cursor and all', async () => {
  const s = `"${store.schema}"`;
  await store.pool.query(`INSERT INTO ${s}.cursors (source) VALUES ('t')`);
  const events = Array.from({ length: 100 }, (_, i) =>
    event(`e_${String(i).padStart(3, '0')}`, 'email.sent', '2024-05-01T10:00:00Z', { email_id: `m_${i}` }),
  );
  const result = await createApplier(timed, route).apply({
    source: 't',
    receivedVia: 'feed',
    events,
    quarantine: [],
    cursor: { prev: null, next: 'e_099' },
  });
  expect(result).toMatchObject({ status: 'applied', duplicates: 0, unstorable: [], outboxRows: 100 });
  expect(result.inserted.map((e) => e.id)).toEqual(events.map((e) => e.id));
  const { rows } = await store.pool.query<{ n: number; after: string }>(
    `SELECT (SELECT count(*)::int FROM ${s}.events) AS n, (SELECT after_id FROM ${s}.cursors WHERE source = 't') AS after`,
  );
  expect(rows[0]).toEqual({ n: 100, after: 'e_099' });
}, 60_000);
