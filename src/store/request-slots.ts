import { quoteSchema, type Store } from './db.js';

/**
 * Reserves `count` request slots, `intervalMs` apart, in the account's row of
 * request_budgets (migrations/0016): one statement that moves the row's next free
 * moment past them, never from earlier than now (an idle account saves up no burst).
 * Resolves to the milliseconds from now (Postgres's clock) until the first slot.
 */
export async function reserveRequestSlots(
  store: Store,
  account: string,
  count: number,
  intervalMs: number,
): Promise<number> {
  const table = `${quoteSchema(store.schema)}.request_budgets`;
  const { rows } = await store.pool.query<{ first_ms: number }>(
    `INSERT INTO ${table} AS b (account, next_at)
       VALUES ($1, now() + $2 * interval '1 millisecond')
     ON CONFLICT (account) DO UPDATE SET next_at = greatest(b.next_at, now()) + $2 * interval '1 millisecond'
     RETURNING (extract(epoch FROM b.next_at - now()) * 1000 - $2)::float8 AS first_ms`,
    [account, count * intervalMs],
  );
  return Math.max(0, rows[0]?.first_ms ?? 0);
}
