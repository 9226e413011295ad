import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore, type Store, tryAcquireSourceLock } from '../../src/store/index.js';
import { TEST_DATABASE_URL } from '../support/postgres.js';
import { migratedStore } from './migrated-store.js';

let store: Store;
let other: Store;
let dispose: () => Promise<void>;

beforeAll(async () => {
  ({ store, dispose } = await migratedStore('lock'));
  other = createStore({
    url: TEST_DATABASE_URL,
    schema: store.schema,
    applicationName: 'feedsync-lock-test',
  });
});
afterAll(async () => {
  await other.close();
  await dispose();
});

describe('tryAcquireSourceLock', () => {
  it('lets one session hold a source; another gets null until it is released', async () => {
    const first = await tryAcquireSourceLock(store, 'acct');
    expect(first).not.toBeNull();
    expect(await tryAcquireSourceLock(other, 'acct')).toBeNull();
    // Another connection of the same pool is another session: also refused.
    expect(await tryAcquireSourceLock(store, 'acct')).toBeNull();
    // Other sources are independent.
    const unrelated = await tryAcquireSourceLock(other, 'acct-2');
    expect(unrelated).not.toBeNull();

    await first!.release();
    await first!.release();
    expect(first!.lost).toBe(false);
    const second = await tryAcquireSourceLock(other, 'acct');
    expect(second).not.toBeNull();
    await second!.release();
    await unrelated!.release();
  });

  it('keys are per schema: the same source in another schema is a different lock', async () => {
    const elsewhere = createStore({ url: TEST_DATABASE_URL, schema: `${store.schema}_x` });
    try {
      const here = await tryAcquireSourceLock(store, 'shared');
      const there = await tryAcquireSourceLock(elsewhere, 'shared');
      expect(here).not.toBeNull();
      expect(there).not.toBeNull();
      await here!.release();
      await there!.release();
    } finally {
      await elsewhere.close();
    }
  });

  it('reports the lock lost when its backend is terminated, and the source is free again', async () => {
    const lock = await tryAcquireSourceLock(other, 'doomed');
    expect(lock).not.toBeNull();
    const aborted = new Promise((resolve) => lock!.signal.addEventListener('abort', resolve, { once: true }));
    const { rows } = await store.pool.query<{ terminated: boolean }>(
      `SELECT pg_terminate_backend(l.pid) AS terminated
         FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND a.application_name = 'feedsync-lock-test'`,
    );
    expect(rows).toEqual([{ terminated: true }]);
    await aborted;
    expect(lock!.lost).toBe(true);
    await lock!.release();

    const again = await tryAcquireSourceLock(other, 'doomed');
    expect(again).not.toBeNull();
    expect(again!.lost).toBe(false);
    await again!.release();
  });
});
