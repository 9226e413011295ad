import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplier } from '../../src/store/applier.js';
import type { Store } from '../../src/store/db.js';
import { pruneExpired } from '../../src/store/retention.js';
import { createSync } from '../../src/sync/sync.js';
import { testConfig, testEnv } from '../support/config.js';
import { runCli } from '../support/processes.js';
import { deletePrefix, uniquePrefix } from '../support/redis.js';
import { useSimulator } from '../support/simulator.js';
import { captureLogger } from '../sync/harness.js';
import { event, migratedStore, route } from './migrated-store.js';

const DAY = 86_400_000;
/** Five CLI processes start at once on a busy machine. */
const CLI_TIMEOUT_MS = 50_000;
const sim = useSimulator({ backlog: 40 });
const prefix = uniquePrefix('retention');
const logs = captureLogger('info');
let store: Store;
let dispose: () => Promise<void>;
let s: string;

beforeAll(async () => {
  ({ store, dispose } = await migratedStore('retention'));
  s = `"${store.schema}"`;
});
afterAll(async () => {
  await dispose();
  await deletePrefix(prefix);
});

const iso = (msAgo: number): string => new Date(Date.now() - msAgo).toISOString();
const count = async (table: string, where = 'true'): Promise<number> =>
  Number(
    (await store.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${s}.${table} WHERE ${where}`)).rows[0]!
      .n,
  );

/** Stores `n` email events of `source`, created `daysAgo` days ago, one email each, their jobs published unless said. */
async function storeAged(
  source: string,
  prefixId: string,
  n: number,
  daysAgo: number,
  published = true,
): Promise<void> {
  const events = Array.from({ length: n }, (_, i) =>
    event(`${prefixId}_${String(i).padStart(5, '0')}`, 'email.delivered', iso(daysAgo * DAY + i * 1000), {
      email_id: `em_${prefixId}_${i}`,
      to: ['a@example.com'],
    }),
  );
  await createApplier(store, route).apply({ source, receivedVia: 'feed', events, quarantine: [] });
  if (published) {
    await store.pool.query(
      `UPDATE ${s}.outbox SET published_at = now() WHERE source = $1 AND event_id LIKE $2 AND published_at IS NULL`,
      [source, `${prefixId}\\_%`],
    );
  }
}

describe('pruneExpired', () => {
  it('deletes old events, quarantine and conflicts of its source in batches; keeps email_status, outbox, newer rows and events whose job is not published', async () => {
    await storeAged('a', 'old', 250, 40);
    await storeAged('a', 'new', 30, 5);
    await storeAged('a', 'held', 3, 40, false);
    await storeAged('b', 'old', 20, 40);
    await store.pool.query(
      `INSERT INTO ${s}.quarantine (source, raw, raw_sha256, reason, received_at)
       VALUES ('a', 'x', 'h1', 'test', now() - interval '40 days'), ('a', 'y', 'h2', 'test', now())`,
    );
    await store.pool.query(
      `INSERT INTO ${s}.conflicts (source, event_id, first_sha256, second_sha256, raw, received_via, received_at)
       VALUES ('a', 'new_00001', 'f', 's1', '{}', 'feed', now() - interval '40 days'),
              ('a', 'new_00002', 'f', 's2', '{}', 'webhook', now())`,
    );
    const batches: number[] = [];
    const result = await pruneExpired(store, {
      source: 'a',
      days: 30,
      batchSize: 100,
      sleep: async () => {
        batches.push(await count('events', `source = 'a'`));
      },
    });
    expect(result).toEqual({ events: 250, quarantine: 1, conflicts: 1, done: true });
    // Two full batches of 100 paused between them; the third (50) ended the table.
    expect(batches).toEqual([183, 83]);
    expect(await count('events', `source = 'a'`)).toBe(33);
    expect(await count('events', `source = 'a' AND id LIKE 'old%'`)).toBe(0);
    // The relay still reads the job's data of these from the event.
    expect(await count('events', `source = 'a' AND id LIKE 'held%'`)).toBe(3);
    expect(await count('events', `source = 'b'`)).toBe(20);
    expect(await count('email_status', `source = 'a'`)).toBe(283);
    expect(await count('outbox', `source = 'a'`)).toBe(283);
    expect(await count('quarantine', `source = 'a'`)).toBe(1);
    expect(await count('conflicts', `source = 'a'`)).toBe(1);
    expect(await pruneExpired(store, { source: 'a', days: 30 })).toEqual({
      events: 0,
      quarantine: 0,
      conflicts: 0,
      done: true,
    });
  });

  it('stops between batches when the run is asked to stop, and the next call goes on', async () => {
    const stop = new AbortController();
    const first = await pruneExpired(store, {
      source: 'b',
      days: 30,
      batchSize: 8,
      signal: stop.signal,
      sleep: async () => stop.abort(),
    });
    expect(first).toEqual({ events: 8, quarantine: 0, conflicts: 0, done: false });
    expect(await pruneExpired(store, { source: 'b', days: 30, batchSize: 8 })).toMatchObject({
      events: 12,
      done: true,
    });
  });
});

describe('EVENTS_RETENTION_DAYS in a run', () => {
  const config = (extra: Record<string, string> = {}) =>
    testConfig({ schema: store.schema, prefix, baseUrl: sim().baseUrl }, { FEED_SOURCE: 'sim', ...extra });

  it('a caught-up run prunes what has aged past the retention, and only with it set', async () => {
    const once = async (extra?: Record<string, string>) => {
      const sync = createSync(config(extra), { logger: logs.logger, store });
      try {
        return await sync.runOnce();
      } finally {
        await sync.close();
      }
    };
    expect(await once()).toMatchObject({ status: 'caught-up', stored: 40 });
    await store.pool.query(
      `UPDATE ${s}.events SET created_at = now() - interval '10 days' WHERE source = 'sim' AND id <= 'evt_000000000015'`,
    );
    await once();
    expect(await count('events', `source = 'sim'`)).toBe(40);
    await once({ EVENTS_RETENTION_DAYS: '7' });
    expect(await count('events', `source = 'sim'`)).toBe(25);
    expect(await count('email_status', `source = 'sim'`)).toBeGreaterThan(0);
    expect(logs.text()).toContain('pruned rows older than EVENTS_RETENTION_DAYS');
  });

  it('cursor set, reconcile --from and reconcile from the start refuse a start older than the retention (exit 2)', async () => {
    const env = testEnv(
      { schema: store.schema, prefix, baseUrl: sim().baseUrl },
      { FEED_SOURCE: 'sim', EVENTS_RETENTION_DAYS: '7' },
    );
    await store.pool.query(
      `UPDATE ${s}.events SET created_at = now() - interval '8 days' WHERE source = 'sim' AND id = 'evt_000000000020'`,
    );
    const [setOld, setPruned, fromOld, fromStart, setRecent] = await Promise.all([
      runCli(['cursor', 'set', 'evt_000000000020'], env, CLI_TIMEOUT_MS),
      runCli(['cursor', 'set', 'evt_000000000003'], env, CLI_TIMEOUT_MS),
      runCli(['reconcile', '--from', 'evt_000000000020'], env, CLI_TIMEOUT_MS),
      runCli(['reconcile'], env, CLI_TIMEOUT_MS),
      runCli(['cursor', 'set', 'evt_000000000030'], env, CLI_TIMEOUT_MS),
    ]);
    for (const refused of [setOld, setPruned, fromOld, fromStart]) {
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr).toContain('EVENTS_RETENTION_DAYS (7)');
    }
    expect(setOld.stderr).toContain('older than EVENTS_RETENTION_DAYS (7)');
    expect(setPruned.stderr).toContain('may have been pruned');
    expect(fromStart.stderr).toContain('give --from');
    expect(setRecent.code, setRecent.stderr).toBe(0);
  }, 60_000);
});
