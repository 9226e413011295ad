import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import type { Publisher } from '../../src/queue/publisher.js';
import { REQUEUE_DEFAULTS, requeue } from '../../src/queue/requeue.js';
import { parseSince } from '../../src/queue/since.js';
import { createStore, type Store } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrate.js';
import { createSync } from '../../src/sync/sync.js';
import { testConfig, testEnv } from '../support/config.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import {
  dropQueues,
  emptyQueues,
  queuePrefix,
  TEST_QUEUE_BACKEND,
  testPublisher,
  testQueue,
  waitingIds,
} from '../support/queues.js';
import { useSimulator } from '../support/simulator.js';

const run = promisify(execFile);
/** Where the CLI says the jobs already were. */
const IN = TEST_QUEUE_BACKEND === 'postgres' ? 'the queues' : 'Redis';
const schema = uniqueSchema('requeue');
const prefix = await queuePrefix('requeue');
const sim = useSimulator({ backlog: 2_500 });
const EMAIL = 'email-events';
const CONTACT = 'contact-events';
let store: Store;
let publisher: Publisher;
let ids: { email: string[]; contact: string[] };
let startedAt: Date;

/** Job ids waiting in a queue: no worker runs, so every added job waits. */
const waiting = (queue: string): Promise<string[]> => waitingIds(queue, prefix);

beforeAll(async () => {
  store = createStore({ url: TEST_DATABASE_URL, schema });
  await migrate(store);
  publisher = testPublisher(prefix);
  sim().emitContactEvent('contact.subscribed', 'new@example.com');
  startedAt = new Date(Date.now() - 1000);
  const sync = createSync(testConfig({ schema, prefix, baseUrl: sim().baseUrl }), {
    logger: createLogger({ level: 'silent' }),
    store,
    publisher,
  });
  try {
    const result = await sync.runOnce();
    expect(result.drained).toBe(true);
  } finally {
    await sync.close();
  }
  ids = { email: await waiting(EMAIL), contact: await waiting(CONTACT) };
});
afterAll(async () => {
  await publisher.close();
  await store.close();
  await dropSchema(schema);
  await dropQueues(prefix);
});

const sorted = (list: string[]) => [...list].sort();

describe('requeue', () => {
  it('puts every job back once, with the same ids and data, after the prefix was flushed', async () => {
    expect(ids.email).toHaveLength(2_500);
    expect(ids.contact).toEqual(['default/evt_000000002501']);
    const q = testQueue(EMAIL, prefix);
    const before = await q.getJob('default/evt_000000000011');
    await emptyQueues(prefix);
    expect(await waiting(EMAIL)).toEqual([]);

    const batches: number[] = [];
    const result = await requeue(store, publisher, {
      source: 'default',
      since: { time: startedAt },
      retentionHours: 168,
      onBatch: (_queue, n) => batches.push(n),
    });
    expect(result).toMatchObject({
      requeued: 2_501,
      added: 2_501,
      alreadyPresent: 0,
      byQueue: { [EMAIL]: 2_500, [CONTACT]: 1 },
      predatesRetention: false,
      unpublished: 0,
    });
    // Batches of 1000 rows, split per queue.
    expect(batches.reduce((a, b) => a + b, 0)).toBe(2_501);
    expect(Math.max(...batches)).toBeLessThanOrEqual(REQUEUE_DEFAULTS.batchSize);
    const email = await waiting(EMAIL);
    expect(sorted(email)).toEqual(sorted(ids.email));
    expect(new Set(email).size).toBe(email.length);
    expect(await waiting(CONTACT)).toEqual(ids.contact);
    const after = await q.getJob('default/evt_000000000011');
    expect(after?.name).toBe(before?.name);
    expect(after?.data).toEqual(before?.data);
    await q.close();
  });

  it('adds nothing new when run again while the jobs are kept', async () => {
    const again = await requeue(store, publisher, {
      source: 'default',
      since: { time: startedAt },
      retentionHours: 168,
    });
    expect(again).toMatchObject({ requeued: 2_501, added: 0, alreadyPresent: 2_501 });
    expect(await waiting(EMAIL)).toHaveLength(2_500);
    expect(await waiting(CONTACT)).toHaveLength(1);
  });

  it("starts from an event's own row, in seq order", async () => {
    await emptyQueues(prefix);
    const result = await requeue(store, publisher, {
      source: 'default',
      since: { eventId: 'evt_000000002001' },
      retentionHours: 168,
    });
    expect(result).toMatchObject({ requeued: 501, added: 501, alreadyPresent: 0 });
    const email = await waiting(EMAIL);
    expect(sorted(email)).toEqual(sorted(ids.email).slice(2_000));
  });

  it('counts a job once when two rows of one batch carry its id (an event stored again)', async () => {
    // An event whose row was deleted by hand and that reconcile stored again has two rows.
    await store.pool.query(
      `INSERT INTO "${schema}".outbox (source, event_id, queue, job_name, payload, created_at, published_at)
       SELECT source, event_id, queue, job_name, payload, created_at, published_at
       FROM "${schema}".outbox WHERE source = 'default' AND event_id = 'evt_000000002500'`,
    );
    try {
      await emptyQueues(prefix);
      const since = { eventId: 'evt_000000002500' };
      const first = await requeue(store, publisher, { source: 'default', since, retentionHours: 168 });
      expect(first).toMatchObject({ requeued: 3, added: 2, alreadyPresent: 0, sameJob: 1 });
      const again = await requeue(store, publisher, { source: 'default', since, retentionHours: 168 });
      expect(again).toMatchObject({ requeued: 3, added: 0, alreadyPresent: 2, sameJob: 1 });
      const line = await run('node', ['dist/bin/feedsync.js', 'requeue', '--since', 'evt_000000002500'], {
        env: { ...process.env, ...testEnv({ schema, prefix }) },
      });
      expect(line.stdout).toContain(
        `requeued 3 published outbox rows of source default (email-events 2, contact-events 1): 0 jobs added, 2 already in ${IN} ` +
          '(left as they were), 1 rows of the same job id as another (an event with two outbox rows: one job)',
      );
    } finally {
      await store.pool.query(
        `DELETE FROM "${schema}".outbox WHERE seq = (SELECT max(seq) FROM "${schema}".outbox WHERE event_id = 'evt_000000002500')`,
      );
    }
  });

  it('counts without adding on a dry run, and refuses an unknown event id', async () => {
    await emptyQueues(prefix);
    const dry = await requeue(store, publisher, {
      source: 'default',
      since: { eventId: 'evt_000000000101' },
      retentionHours: 168,
      dryRun: true,
    });
    expect(dry).toMatchObject({ requeued: 2_401, byQueue: { [EMAIL]: 2_400, [CONTACT]: 1 } });
    expect(await waiting(EMAIL)).toEqual([]);
    await expect(
      requeue(store, publisher, { source: 'default', since: { eventId: 'evt_nope' }, retentionHours: 168 }),
    ).rejects.toMatchObject({ code: 'UNKNOWN_EVENT', exitCode: 2 });
    const none = await requeue(store, publisher, {
      source: 'other',
      since: { time: startedAt },
      retentionHours: 168,
    });
    expect(none).toMatchObject({ requeued: 0, fromSeq: null, oldestKept: null });
  });

  it('starts at the rows stored with an event that has no job of its own', async () => {
    await store.pool.query(
      `INSERT INTO "${schema}".events (source, id, type, created_at, data, received_via, received_at)
       SELECT 'default', 'evt_test_1', 'webhook.test', now(), '{}', 'webhook', created_at
         FROM "${schema}".outbox WHERE event_id = 'evt_000000002401'`,
    );
    const result = await requeue(store, publisher, {
      source: 'default',
      since: { eventId: 'evt_test_1' },
      retentionHours: 168,
      dryRun: true,
    });
    // Same transaction timestamp as its batch: the whole batch of that commit qualifies.
    expect(result.requeued).toBeGreaterThanOrEqual(101);
    expect(result.predatesRetention).toBe(false);
  });

  it('says when the start predates the oldest row kept by the retention', async () => {
    await store.pool.query(
      `UPDATE "${schema}".outbox SET published_at = now() - interval '8 days' WHERE source = 'default'`,
    );
    try {
      const old = await requeue(store, publisher, {
        source: 'default',
        since: { time: new Date(Date.now() - 30 * 86_400_000) },
        retentionHours: 168,
        dryRun: true,
      });
      expect(old.predatesRetention).toBe(true);
      expect(old.requeued).toBe(2_501);
      const recent = await requeue(store, publisher, {
        source: 'default',
        since: { time: new Date(Date.now() - 3_600_000) },
        retentionHours: 168,
        dryRun: true,
      });
      expect(recent).toMatchObject({ predatesRetention: false, requeued: 0 });
    } finally {
      await store.pool.query(`UPDATE "${schema}".outbox SET published_at = now() WHERE source = 'default'`);
    }
  });

  it('runs as `feedsync requeue`, printing how many rows it re-drove', async () => {
    await emptyQueues(prefix);
    const env = { ...process.env, ...testEnv({ schema, prefix }) };
    const { stdout } = await run('node', ['dist/bin/feedsync.js', 'requeue', '--since', '1h'], { env });
    expect(stdout).toMatch(/^requeued 2501 published outbox rows of source default \(/);
    expect(stdout).toContain(`: 2501 jobs added, 0 already in ${IN}`);
    const again = await run('node', ['dist/bin/feedsync.js', 'requeue', '--since', '1h'], { env });
    expect(again.stdout).toContain(`: 0 jobs added, 2501 already in ${IN}`);
    expect(sorted(await waiting(EMAIL))).toEqual(sorted(ids.email));
    const json = await run(
      'node',
      ['dist/bin/feedsync.js', 'requeue', '--since', 'evt_000000002500', '--json'],
      {
        env,
      },
    );
    expect(JSON.parse(json.stdout)).toMatchObject({
      source: 'default',
      requeued: 2,
      added: 0,
      alreadyPresent: 2,
      dryRun: false,
    });
    const help = await run('node', ['dist/bin/feedsync.js', 'requeue', '--help'], { env });
    expect(help.stdout).toContain('OUTBOX_RETENTION_HOURS');
    const bad = await run('node', ['dist/bin/feedsync.js', 'requeue'], { env }).catch(
      (err: { code: number }) => err,
    );
    expect((bad as { code: number }).code).toBe(2);
  }, 60_000);

  it('acts on every source of FEED_SOURCES_FILE without --source; an event id needs --source', async () => {
    await emptyQueues(prefix);
    const dir = mkdtempSync(join(tmpdir(), 'requeue-sources-'));
    try {
      const file = join(dir, 'sources.json');
      const entries = ['default', 'acme', 'globex'].map((source) => ({ source, base_url: sim().baseUrl }));
      writeFileSync(file, JSON.stringify({ sources: entries }));
      const env = { ...process.env, ...testEnv({ schema, prefix }), FEED_SOURCES_FILE: file };
      const { stdout } = await run('node', ['dist/bin/feedsync.js', 'requeue', '--since', '1h'], { env });
      const lines = stdout.trim().split('\n');
      expect(lines[0]).toMatch(
        /^requeued 2501 published outbox rows of source default \(.*: 2501 jobs added/,
      );
      expect(lines.at(-1)).toBe(
        'in all: requeued 2501 published outbox rows of 3 sources of FEED_SOURCES_FILE: 2501 jobs added, ' +
          `0 already in ${IN} (2 sources had no rows)`,
      );
      expect(sorted(await waiting(EMAIL))).toEqual(sorted(ids.email));
      const json = await run('node', ['dist/bin/feedsync.js', 'requeue', '--since', '1h', '--json'], { env });
      const parsed = json.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { source: string; alreadyPresent: number });
      expect(parsed.map((r) => [r.source, r.alreadyPresent])).toEqual([
        ['default', 2501],
        ['acme', 0],
        ['globex', 0],
      ]);
      const one = await run(
        'node',
        ['dist/bin/feedsync.js', 'requeue', '--since', '1h', '--source', 'acme'],
        {
          env,
        },
      );
      expect(one.stdout).toMatch(/^requeued 0 published outbox rows of source acme: 0 jobs added/);
      const byId = await run('node', ['dist/bin/feedsync.js', 'requeue', '--since', 'evt_000000002500'], {
        env,
      }).catch((err: { code: number; stderr: string }) => err);
      expect(byId).toMatchObject({ code: 2 });
      expect((byId as { stderr: string }).stderr).toContain('an event id is one source');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('refuses, before any query, a --since off the calendar or out of range (exit 2)', async () => {
    const env = {
      ...process.env,
      ...testEnv({ schema, prefix }),
      DATABASE_URL: 'postgres://postgres@127.0.0.1:1/x',
    };
    // The other shapes are parseSince's cases below; here the CLI's exit and message.
    const sinces = ['999999999d', '2024-02-30'];
    const runs = sinces.map(
      async (since) =>
        [
          since,
          (await run('node', ['dist/bin/feedsync.js', 'requeue', '--since', since], { env }).catch(
            (err: unknown) => err,
          )) as { code: number; stderr: string },
        ] as const,
    );
    for (const [since, failed] of await Promise.all(runs)) {
      expect(failed.code, since).toBe(2);
      expect(failed.stderr, since).toMatch(/--since: /);
      // Postgres sits at a closed port: an error from it would name the connection, not --since.
      expect(failed.stderr, since).not.toMatch(/ECONNREFUSED|Postgres/);
    }
  }, 60_000);

  it('refuses a start older than EVENTS_RETENTION_DAYS, by time or by event id (exit 2)', async () => {
    await store.pool.query(
      `UPDATE "${schema}".events SET received_at = now() - interval '40 days' WHERE id = 'evt_000000000005'`,
    );
    const opts = { source: 'default', retentionHours: 168, eventsRetentionDays: 30, dryRun: true };
    await expect(
      requeue(store, publisher, { ...opts, since: { time: new Date(Date.now() - 31 * 86_400_000) } }),
    ).rejects.toMatchObject({ code: 'BEFORE_RETENTION', exitCode: 2 });
    await expect(
      requeue(store, publisher, { ...opts, since: { eventId: 'evt_000000000005' } }),
    ).rejects.toThrow(/older than EVENTS_RETENTION_DAYS \(30\)/);
    await expect(requeue(store, publisher, { ...opts, since: { eventId: 'evt_gone' } })).rejects.toThrow(
      /not stored .* may have been pruned/,
    );
    const inside = await requeue(store, publisher, { ...opts, since: { eventId: 'evt_000000002500' } });
    expect(inside.requeued).toBe(2);
    const env = { ...process.env, ...testEnv({ schema, prefix }, { EVENTS_RETENTION_DAYS: '30' }) };
    const refused = (await run('node', ['dist/bin/feedsync.js', 'requeue', '--since', '31d'], { env }).catch(
      (err: unknown) => err,
    )) as { code: number; stderr: string };
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('older than EVENTS_RETENTION_DAYS (30)');
  });

  it('counts the rows whose event is gone the same on a dry run and a real one, names them, and exits 1', async () => {
    await store.pool.query(
      `DELETE FROM "${schema}".events WHERE id IN ('evt_000000000007', 'evt_000000002400')`,
    );
    const opts = { source: 'default', retentionHours: 168, since: { time: startedAt } };
    const dry = await requeue(store, publisher, { ...opts, dryRun: true });
    const real = await requeue(store, publisher, opts);
    for (const result of [dry, real]) {
      expect(result).toMatchObject({
        requeued: 2_499,
        unavailable: 2,
        unavailableIds: ['evt_000000000007', 'evt_000000002400'],
      });
    }
    expect(dry.byQueue).toEqual(real.byQueue);
    const env = { ...process.env, ...testEnv({ schema, prefix }) };
    for (const flags of [['--dry-run'], []]) {
      const failed = (await run('node', ['dist/bin/feedsync.js', 'requeue', '--since', '1h', ...flags], {
        env,
      }).catch((err: unknown) => err)) as { code: number; stdout: string };
      expect(failed.code).toBe(1);
      expect(failed.stdout).toContain('2499 published outbox rows');
      expect(failed.stdout).toContain('2 published rows');
      expect(failed.stdout).toContain('"evt_000000000007", "evt_000000002400"');
    }
  }, 60_000);
});

describe('parseSince', () => {
  const now = Date.parse('2024-05-01T12:00:00Z');
  it('reads dates, date-times (UTC without a zone) and durations back from now', () => {
    expect(parseSince('2024-04-30', now)).toEqual({ time: new Date('2024-04-30T00:00:00Z') });
    expect(parseSince('2024-04-30T10:15', now)).toEqual({ time: new Date('2024-04-30T10:15:00Z') });
    expect(parseSince('2024-04-30 10:15:30', now)).toEqual({ time: new Date('2024-04-30T10:15:30Z') });
    expect(parseSince('2024-04-30T10:15:00+02:00', now)).toEqual({ time: new Date('2024-04-30T08:15:00Z') });
    expect(parseSince('90m', now)).toEqual({ time: new Date('2024-05-01T10:30:00Z') });
    expect(parseSince('2d', now)).toEqual({ time: new Date('2024-04-29T12:00:00Z') });
  });
  it('takes anything else as an event id, and refuses an impossible date', () => {
    expect(parseSince('evt_000000000042', now)).toEqual({ eventId: 'evt_000000000042' });
    expect(parseSince(' ev:1 ', now)).toEqual({ eventId: 'ev:1' });
    expect(() => parseSince('2024-13-45', now)).toThrow(/not a valid date/);
    expect(() => parseSince('2024-02-30', now)).toThrow(/not a valid date/);
    expect(() => parseSince('2023-02-29', now)).toThrow(/not a valid date/);
    expect(parseSince('2024-02-29', now)).toEqual({ time: new Date('2024-02-29T00:00:00Z') });
    expect(() => parseSince('2024-04-30T23:60', now)).toThrow(/not a valid date/);
    expect(() => parseSince('2024-04-30T10:00+24:00', now)).toThrow(/not a valid date/);
    expect(parseSince('2024-04-30t10:00z', now)).toEqual({ time: new Date('2024-04-30T10:00:00Z') });
    expect(() => parseSince('  ', now)).toThrow(/time or an event id/);
  });
  it('refuses a duration past a hundred years and a time in the future', () => {
    expect(() => parseSince('999999999d', now)).toThrow(/more than 100 years/);
    expect(() => parseSince('99999999999999999999s', now)).toThrow(/more than 100 years/);
    expect(parseSince('36500d', now)).toEqual({ time: new Date(now - 36_500 * 86_400_000) });
    expect(() => parseSince('2024-05-02', now)).toThrow(/in the future/);
    expect(() => parseSince('1969-12-31', now)).toThrow(/before 1970/);
  });
});
