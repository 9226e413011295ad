import { afterEach, expect, it } from 'vitest';
import { createStore, type Store } from '../../src/store/db.js';
import { type StallingProxy, startStallingProxy } from '../faults/support/stalling-proxy.js';
import { TEST_DATABASE_URL } from '../support/postgres.js';

const DEADLINE_MS = 700;
let proxy: StallingProxy | undefined;
let store: Store | undefined;
afterEach(async () => {
  proxy?.resume();
  await store?.close();
  await proxy?.close();
});

it('a statement whose connection stops answering fails at its deadline, and the pool goes on with a new connection', async () => {
  const target = new URL(TEST_DATABASE_URL);
  proxy = await startStallingProxy({ host: target.hostname, port: Number(target.port) });
  const url = new URL(TEST_DATABASE_URL);
  url.host = `127.0.0.1:${proxy.port}`;
  store = createStore({ url: url.toString(), schema: 'public', max: 1, statementTimeoutMs: DEADLINE_MS });
  const backendOf = async (s: Store) =>
    (await s.pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;
  const first = await backendOf(store);

  // The flow stops after the connection was made: the server never sees the statement.
  proxy.stall();
  const started = performance.now();
  await expect(store.pool.query('SELECT 1')).rejects.toThrow('Query read timeout');
  // It failed by its own deadline (not earlier), and no later than the test's bound.
  expect(performance.now() - started).toBeGreaterThanOrEqual(DEADLINE_MS - 50);
  // The stuck connection was dropped, not returned to the pool for the next statement to queue behind.
  expect(store.pool.totalCount).toBe(0);

  proxy.resume();
  const second = await backendOf(store);
  expect(second).toBeTypeOf('number');
  expect(second).not.toBe(first);
});
