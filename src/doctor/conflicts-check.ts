import { quoteSchema, type Store } from '../store/db.js';
import { conflictsRecorded } from '../store/health.js';
import { type Check, check } from './report.js';

/**
 * Events served again under a stored id with other content: the first version stays in
 * `events`, the newest other one of each id waits in `conflicts` for someone to look,
 * counting the rest. A store with thousands of them has been fed a rewritten feed,
 * which is not "all is well".
 */
export async function conflictsCheck(store: Store): Promise<Check> {
  const table = `${quoteSchema(store.schema)}.conflicts`;
  const { ids: n, versions, sources } = await conflictsRecorded(store);
  if (n === 0) return check('conflicts', 'ok', 'no event came back with other content');
  return check(
    'conflicts',
    'warn',
    `${n} event${n === 1 ? '' : 's'} came back from the feed with other content than stored ` +
      `(${versions} version${versions === 1 ? '' : 's'}; sources: ${sources ?? ''}); ` +
      `the first version is kept, the newest other one of each waits in ${table}`,
    `compare them (SELECT source, event_id, versions_seen, received_at, raw FROM ${table}) with the stored events; ` +
      'many at once mean the feed was rewritten or the cursor was reset against another account: ' +
      'put that right, then delete the rows you have handled',
  );
}
