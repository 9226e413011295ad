import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getCursor } from '../../src/store/cursor.js';
import type { Store } from '../../src/store/db.js';
import { createSync } from '../../src/sync/sync.js';
import { migratedStore } from '../store/migrated-store.js';
import { testConfig } from '../support/config.js';
import { captureLogger } from '../support/logs.js';
import { deletePrefix, uniquePrefix } from '../support/redis.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';

// The library's once run (createSync(config).runOnce) keeps SYNC_ONCE_MAX_MS as the CLI does.
const prefix = uniquePrefix('once-limit');
// As good as endless for a run of a second and a half.
const sim = useSimulator({ backlog: 1_000_000_000 });
const logs = captureLogger({ secrets: [TEST_API_KEY] });
let store: Store;
let schema: string;
let dispose: () => Promise<void>;

beforeAll(async () => {
  ({ store, dispose } = await migratedStore('once_limit'));
  schema = store.schema;
});
afterAll(async () => {
  await dispose();
  await deletePrefix(prefix);
});

describe('runOnce against a feed without end', () => {
  it('stops at SYNC_ONCE_MAX_MS with what it fetched committed and handed over; the next run goes on', async () => {
    const config = testConfig({ schema, prefix, baseUrl: sim().baseUrl }, { SYNC_ONCE_MAX_MS: '1500' });
    const sync = createSync(config, { logger: logs.logger, store });
    try {
      const first = await sync.runOnce();
      expect(first).toMatchObject({ status: 'limit-reached', drained: true });
      expect(first.stored).toBeGreaterThan(0);
      const cursor = await getCursor(store, 'default');
      expect(cursor?.afterId).toBe(first.cursor);
      expect(cursor?.lastSuccessAt ?? null).toBeNull();
      const { rows } = await store.pool.query<{ n: number; open: number }>(
        `SELECT count(*)::int AS n, count(*) FILTER (WHERE published_at IS NULL)::int AS open FROM "${schema}".outbox`,
      );
      expect(rows[0]).toEqual({ n: first.stored, open: 0 });

      const second = await sync.runOnce();
      expect(second.status).toBe('limit-reached');
      expect(second.cursor! > first.cursor!).toBe(true);
      const stored = await store.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${schema}".events`,
      );
      expect(stored.rows[0]?.n).toBe(first.stored + second.stored);
    } finally {
      await sync.close();
    }
  }, 60_000);
});
