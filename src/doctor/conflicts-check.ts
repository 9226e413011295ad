import { quoteSchema, type Store } from '../store/db.js';
import { type Check, check } from './report.js';

/**
 * Events the feed served again under a stored id with other content: the first version
 * stays in `events`, every other one waits in `conflicts` for someone to look. A store
 * with thousands of them has been fed a rewritten feed, which is not "all is well".
 */
export async function conflictsCheck(store: Store): Promise<Check> {
  const table = `${quoteSchema(store.schema)}.conflicts`;
  const { rows } = await store.pool.query<{ n: string; sources: string | null }>(
    `SELECT count(*) AS n, string_agg(DISTINCT source, ', ') AS sources FROM ${table}`,
  );
  const n = Number(rows[0]?.n ?? 0);
  if (n === 0) return check('conflicts', 'ok', 'no event came back with other content');
  return check(
    'conflicts',
    'warn',
    `${n} event${n === 1 ? '' : 's'} came back from the feed with other content than stored ` +
      `(sources: ${rows[0]?.sources ?? ''}); the first version is kept, the others wait in ${table}`,
    `compare them (SELECT source, event_id, received_at, raw FROM ${table}) with the stored events; ` +
      'many at once mean the feed was rewritten or the cursor was reset against another account: ' +
      'put that right, then delete the rows you have handled',
  );
}
