import { advisoryKey } from './advisory-key.js';
import type { Store } from './db.js';

/** A held per-source session lock. */
export interface SourceLock {
  /** Unlocks and returns the connection to the pool. Safe to call twice. */
  release(): Promise<void>;
  /** True once the connection holding the lock has died: the lock is gone with it. */
  readonly lost: boolean;
  /** Aborted when the lock is lost, so a run in flight can stop early. */
  readonly signal: AbortSignal;
}

/**
 * Takes the session advisory lock of `source` in this schema on a dedicated pooled
 * connection, held until `release()`. Returns null at once when another session
 * holds it. The lock keeps a second poller idle; correctness never depends on it
 * (the cursor compare-and-set does that).
 */
export async function tryAcquireSourceLock(store: Store, source: string): Promise<SourceLock | null> {
  const [k1, k2] = advisoryKey('feedsync.source', store.schema, source);
  const client = await store.pool.connect();
  const controller = new AbortController();
  const onGone = (err?: Error) => {
    if (!controller.signal.aborted) controller.abort(err ?? new Error('lock connection ended'));
  };
  // A checked-out client that errors with no listener would crash the process.
  client.on('error', onGone);
  client.on('end', onGone);
  const detach = () => {
    client.off('error', onGone);
    client.off('end', onGone);
  };

  let acquired: boolean;
  try {
    const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, $2) AS ok', [
      k1,
      k2,
    ]);
    acquired = rows[0]?.ok === true;
  } catch (err) {
    detach();
    client.release(err instanceof Error ? err : true);
    throw err;
  }
  if (!acquired) {
    detach();
    client.release();
    return null;
  }

  let released: Promise<void> | undefined;
  const release = async (): Promise<void> => {
    if (controller.signal.aborted) {
      detach();
      client.release(true);
      return;
    }
    try {
      await client.query('SELECT pg_advisory_unlock($1, $2)', [k1, k2]);
      detach();
      client.release();
    } catch (err) {
      detach();
      // Ending the session frees the lock anyway.
      client.release(err instanceof Error ? err : true);
    }
  };
  return {
    release: () => {
      released ??= release();
      return released;
    },
    get lost() {
      return controller.signal.aborted;
    },
    signal: controller.signal,
  };
}
