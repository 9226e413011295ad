// What sending the page applier's statement unnamed costs against a named prepared
// statement (planned once per connection), which a transaction pooler cannot carry:
// batches of new events (100: one page, the caught-up case; 1000: a catch-up's load of
// ten pages) applied on one connection, named and unnamed in alternating rounds so that
// the machine's load falls on both alike.
//   npm run build && node bench/prepared-statement.mjs [events-per-batch] [batches-per-round] [rounds]
import { applyStatement } from '../dist/store/apply-statement.js';
import { createStore } from '../dist/store/db.js';
import { migrate } from '../dist/store/migrate.js';
import { benchSchema, cleanUp, DATABASE_URL, withPg } from './lib/env.mjs';

const EVENTS = Number(process.argv[2] ?? 100);
const pagesPerRound = Number(process.argv[3] ?? 200);
const rounds = Number(process.argv[4] ?? 6);
const routes = JSON.stringify({
  'email.sent': ['email-events', 'email.sent'],
  'email.delivered': ['email-events', 'email.delivered'],
});

let next = 0;
/** The statement's parameters for one page of new events, as the applier builds them. */
function page() {
  const events = [];
  for (let i = 0; i < EVENTS; i++) {
    const n = next++;
    events.push({
      id: `evt_${String(n).padStart(12, '0')}`,
      type: n % 2 ? 'email.delivered' : 'email.sent',
      created_at: new Date(1_700_000_000_000 + n * 1000).toISOString(),
      data: { email_id: `em_${n >> 1}`, to: [`r${n}@example.com`], subject: 'hello' },
    });
  }
  return ['default', 'feed', JSON.stringify(events), routes, false, null, null, [], [], '[]', null];
}

try {
  const schema = benchSchema('prepared');
  const store = createStore({ url: DATABASE_URL, schema });
  await migrate(store);
  await store.close();
  const text = applyStatement(`"${schema}"`);
  const times = { named: [], unnamed: [] };
  await withPg(async (db) => {
    // Warm both paths (and the named plan) before measuring.
    await db.query({ name: 'bench_apply', text, values: page() });
    await db.query(text, page());
    for (let r = 0; r < rounds; r++) {
      for (const mode of r % 2 ? ['unnamed', 'named'] : ['named', 'unnamed']) {
        for (let p = 0; p < pagesPerRound; p++) {
          const values = page();
          const started = performance.now();
          await db.query(mode === 'named' ? { name: 'bench_apply', text, values } : { text, values });
          times[mode].push(performance.now() - started);
        }
      }
    }
  });
  const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  const named = median(times.named);
  const unnamed = median(times.unnamed);
  console.log(
    `batches of ${EVENTS} events, ${times.named.length} per mode: median named ${named.toFixed(2)} ms, ` +
      `unnamed ${unnamed.toFixed(2)} ms, unnamed costs ${(unnamed - named).toFixed(2)} ms a batch ` +
      `(${(((unnamed - named) / named) * 100).toFixed(0)}%, ${(((unnamed - named) * 1000) / EVENTS).toFixed(1)} µs an event)`,
  );
} finally {
  await cleanUp();
}
