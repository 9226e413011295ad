import { beforeEach, describe, expect, it } from 'vitest';
import { ApiError, AuthError, ConfigError, exitCodeOf, PageError } from '../../src/errors.js';
import { DEFAULT_FAULTS, type Faults } from '../../src/simulator/index.js';
import { setCursor } from '../../src/store/cursor.js';
import { queryBuilder } from '../../src/store/db.js';
import { createSync, type SyncOptions } from '../../src/sync/sync.js';
import { testConfig } from '../support/config.js';
import { dropSchema, uniqueSchema } from '../support/postgres.js';
import { deletePrefix, uniquePrefix } from '../support/redis.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import { startFeedServer } from './feed-server.js';
import {
  captureLogger,
  cursorOf,
  expectExactlyOnce,
  expectStoredUpToCursor,
  queuedJobIds,
  type Sandbox,
  seededRandom,
  storedCount,
  useSandboxes,
} from './harness.js';

const BACKLOG = 1000;
const LIMIT = 50;
let random = seededRandom(1);
const sim = useSimulator({ backlog: BACKLOG, random: () => random() });
const sandbox = useSandboxes();
const logs = captureLogger();

beforeEach((ctx) => {
  random = seededRandom(ctx.task.name.length);
  sim().setFaults(DEFAULT_FAULTS);
});

/** A sync whose feed retries never really wait: the waits asked for are recorded instead. */
function syncFor(box: Sandbox, env: Record<string, string> = {}, opts: Partial<SyncOptions> = {}) {
  const waits: number[] = [];
  const config = testConfig(
    { schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl },
    { FEED_PAGE_LIMIT: String(LIMIT), ...env },
  );
  const sync = createSync(config, {
    logger: logs.logger,
    store: box.store,
    retryDeps: {
      sleep: async (ms) => {
        waits.push(ms);
      },
    },
    ...opts,
  });
  return { sync, waits };
}

const feedAnswers = (status: number): number => sim().stats().requests['GET /api/events']?.[status] ?? 0;

interface FaultCase {
  name: string;
  /** Some requests fail: the run retries through them. */
  some: Partial<Faults>;
  /** Every request fails: the run gives up. */
  every: Partial<Faults>;
  env?: Record<string, string>;
}

const FAULTS: FaultCase[] = [
  { name: '429 with Retry-After', some: { rate429: 0.3, retryAfterSec: 1 }, every: { rate429: 1 } },
  { name: 'bursts of 503', some: { rate5xx: 0.4 }, every: { rate5xx: 1 } },
  { name: 'truncated bodies', some: { truncateRate: 0.3 }, every: { truncateRate: 1 } },
  {
    name: 'bodies that hang',
    some: { hangRate: 0.06 },
    every: { hangRate: 1 },
    env: { FEED_TIMEOUT_MS: '300' },
  },
];

describe('faults of the feed, against the simulator', () => {
  it.each(FAULTS)('$name: retried through, every event stored and enqueued once', async (fault) => {
    const box = await sandbox('faults_some');
    sim().setFaults(fault.some);
    const { sync, waits } = syncFor(box, fault.env);
    try {
      const result = await sync.runOnce();
      expect(result).toMatchObject({ status: 'caught-up', drained: true, stored: BACKLOG });
    } finally {
      await sync.close();
    }
    expect(waits.length, 'the fault happened and was retried').toBeGreaterThan(0);
    if (fault.some.rate429) for (const w of waits) expect(w).toBeGreaterThanOrEqual(1000);
    await expectExactlyOnce({ store: box.store, prefix: box.prefix, expected: BACKLOG });
    await expectStoredUpToCursor(box.store);
  });

  it.each(FAULTS)(
    '$name on every request: the run fails, the cursor stops before the bad page',
    async (fault) => {
      const box = await sandbox('faults_every');
      let served = 0;
      // From the fourth request on, every answer is bad.
      const { sync, waits } = syncFor(
        box,
        { ...fault.env, FEED_MAX_RETRIES: '1' },
        {
          hooks: {
            onFeedResponse: ({ status }) => {
              if (status === 200 && ++served === 3) sim().setFaults(fault.every);
            },
          },
        },
      );
      let err: unknown;
      try {
        err = await sync.runOnce().catch((e: unknown) => e);
      } finally {
        await sync.close();
      }
      expect(err).toBeInstanceOf(ApiError);
      expect(exitCodeOf(err)).toBe(1);
      // One retry of the bad page (a slow good page may have cost one more under load).
      expect(waits.length).toBeGreaterThanOrEqual(1);
      expect(await expectStoredUpToCursor(box.store)).toBe(`evt_${String(3 * LIMIT).padStart(12, '0')}`);

      sim().setFaults(DEFAULT_FAULTS);
      const again = syncFor(box);
      try {
        expect(await again.sync.runOnce()).toMatchObject({
          status: 'caught-up',
          stored: BACKLOG - 3 * LIMIT,
        });
      } finally {
        await again.sync.close();
      }
      await expectExactlyOnce({ store: box.store, prefix: box.prefix, expected: BACKLOG });
    },
  );

  it('a 401 fails at once with exit code 3, without a retry', async () => {
    const box = await sandbox('faults_401');
    const before = feedAnswers(401);
    const { sync, waits } = syncFor(box, { FEED_API_KEY: 'not_a_valid_key' });
    try {
      const err = await sync.runOnce().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AuthError);
      expect(exitCodeOf(err)).toBe(3);
      expect((err as Error).message).not.toContain('not_a_valid_key');
    } finally {
      await sync.close();
    }
    expect(waits).toEqual([]);
    expect(feedAnswers(401) - before).toBe(1);
    expect(await storedCount(box.store)).toBe(0);
  });

  it('duplicates across pages are counted as duplicates and stored once', async () => {
    const box = await sandbox('faults_dup');
    sim().setFaults({ duplicateRate: 1 });
    const { sync } = syncFor(box);
    try {
      const result = await sync.runOnce();
      expect(result).toMatchObject({ status: 'caught-up', stored: BACKLOG, quarantined: 0 });
      // Each page after the first repeats the three events before it (an empty last page does not).
      expect(result.duplicates).toBeGreaterThanOrEqual(3 * (result.pages - 2));
      expect(result.duplicates).toBeLessThanOrEqual(3 * (result.pages - 1));
    } finally {
      await sync.close();
    }
    await expectExactlyOnce({ store: box.store, prefix: box.prefix, expected: BACKLOG });
  });
});

describe('pages of a feed server of the test', () => {
  const at = '2024-05-01T10:00:00.000Z';
  const ev = (n: number, type = 'email.delivered') => ({
    id: `evt_x${n}`,
    type,
    created_at: at,
    data: type.startsWith('email.')
      ? { email_id: `em_${n}`, to: ['a@example.com'] }
      : { email: 'c@example.com' },
  });

  async function runOn(box: Sandbox, baseUrl: string, env: Record<string, string> = {}) {
    const config = testConfig({ schema: box.schema, prefix: box.prefix, baseUrl }, env);
    const sync = createSync(config, { logger: logs.logger, store: box.store });
    try {
      return await sync.runOnce();
    } finally {
      await sync.close();
    }
  }

  it('stores duplicates within a page once, unknown types without a job, bad items in quarantine once', async () => {
    const items = [
      ev(1, 'email.sent'),
      ev(2),
      ev(1, 'email.sent'),
      ev(3, 'email.opened'),
      42,
      { type: 'email.sent', created_at: at, data: {} },
      { ...ev(4), created_at: 'yesterday' },
      ev(5, 'contact.subscribed'),
      ev(2),
      'junk',
      ev(6, 'webhook.test'),
    ];
    const feed = await startFeedServer(items);
    const box = await sandbox('faults_items');
    try {
      const first = await runOn(box, feed.baseUrl);
      expect(first).toMatchObject({
        status: 'caught-up',
        stored: 5,
        duplicates: 2,
        quarantined: 4,
        drained: true,
      });
      const stored = await (await queryBuilder(box.store))
        .selectFrom('events')
        .select(['id', 'type'])
        .orderBy('id')
        .execute();
      expect(stored.map((e) => e.id)).toEqual(['evt_x1', 'evt_x2', 'evt_x3', 'evt_x5', 'evt_x6']);
      const quarantine = await (await queryBuilder(box.store))
        .selectFrom('quarantine')
        .select(['reason'])
        .execute();
      expect(quarantine.map((q) => q.reason).sort()).toEqual([
        'bad created_at',
        'no id',
        'not an object',
        'not an object',
      ]);
      await expectExactlyOnce({ store: box.store, prefix: box.prefix, expected: 5 });
      expect(await queuedJobIds(box.prefix, 'email-events')).toHaveLength(2);

      // Read the same page again from the start: nothing new, quarantine unchanged.
      await setCursor(box.store, 'default', null);
      const second = await runOn(box, feed.baseUrl);
      expect(second).toMatchObject({ stored: 0, duplicates: 7, quarantined: 0 });
      expect(
        await (await queryBuilder(box.store)).selectFrom('quarantine').select('id').execute(),
      ).toHaveLength(4);
      await expectExactlyOnce({ store: box.store, prefix: box.prefix, expected: 5 });
    } finally {
      await feed.close();
    }
  });

  it.each([
    ['not JSON', '{"data": [', 'NOT_JSON'],
    ['no list', '{"items": 1, "next_after": null}', 'NO_LIST'],
    [
      'more events than the limit',
      JSON.stringify({ data: [1, 2, 3, 4, 5].map((n) => ev(100 + n)) }),
      'TOO_MANY',
    ],
  ])(
    'a page that is %s fails the run; the pages before it commit, the cursor stops before it',
    async (_name, raw, code) => {
      const items = Array.from({ length: 12 }, (_, i) => ev(i + 1));
      // Pages of 4: the third page, after evt_x8, is broken.
      const feed = await startFeedServer(items, {
        rawPage: (after) => (after === 'evt_x8' ? raw : undefined),
      });
      const box = await sandbox('faults_page');
      try {
        const err = await runOn(box, feed.baseUrl, { FEED_PAGE_LIMIT: '4' }).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(PageError);
        expect(err).toMatchObject({ code, exitCode: 1 });
        expect(await cursorOf(box.store)).toBe('evt_x8');
        expect(await storedCount(box.store)).toBe(8);
      } finally {
        await feed.close();
      }
    },
  );

  it('sends FEED_TYPES in short form, filters client-side, and refuses another filter on the same cursor', async () => {
    const items = [
      ev(1, 'email.sent'),
      ev(2, 'email.bounced'),
      ev(3, 'contact.subscribed'),
      ev(4, 'contact.unsubscribed'),
      ev(5, 'email.bounced'),
      ev(6, 'webhook.test'),
    ];
    const feed = await startFeedServer(items);
    const box = await sandbox('faults_types');
    try {
      const types = { FEED_TYPES: 'email.bounced,contact.subscribed' };
      const result = await runOn(box, feed.baseUrl, types);
      expect(result).toMatchObject({ status: 'caught-up', stored: 3 });
      expect(new Set(feed.queries[0]?.get('type')?.split(','))).toEqual(
        new Set(['bounced', 'contact.subscribed']),
      );
      const stored = await (await queryBuilder(box.store))
        .selectFrom('events')
        .select('id')
        .orderBy('id')
        .execute();
      expect(stored.map((e) => e.id)).toEqual(['evt_x2', 'evt_x3', 'evt_x5']);
      await expectExactlyOnce({ store: box.store, prefix: box.prefix, expected: 3 });

      const requests = feed.queries.length;
      const err = await runOn(box, feed.baseUrl).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConfigError);
      expect(err).toMatchObject({ code: 'TYPES_MISMATCH', exitCode: 2 });
      expect((err as Error).message).toContain('feedsync cursor reset --source default');
      expect(feed.queries.length, 'no page read with the other filter').toBe(requests);
      expect(await storedCount(box.store)).toBe(3);
    } finally {
      await feed.close();
    }
  });
});

describe('the schema', () => {
  it('refuses to run on a schema without feedsync tables, saying to check DATABASE_SCHEMA or migrate, and migrates when asked', async () => {
    const schema = uniqueSchema('faults_unmigrated');
    const prefix = uniquePrefix('faults-unmigrated');
    const config = testConfig({ schema, prefix, baseUrl: sim().baseUrl });
    try {
      const sync = createSync(config, { logger: logs.logger });
      try {
        const err = await sync.runOnce().catch((e: unknown) => e);
        expect(err).toBeInstanceOf(ConfigError);
        expect(err).toMatchObject({ code: 'SCHEMA_MISSING', exitCode: 2 });
        expect((err as Error).message).toContain('check DATABASE_SCHEMA');
        expect((err as Error).message).toContain('feedsync migrate');
      } finally {
        await sync.close();
      }
      const migrating = createSync(config, { logger: logs.logger, autoMigrate: true });
      try {
        expect(await migrating.runOnce()).toMatchObject({ status: 'caught-up', stored: BACKLOG });
      } finally {
        await migrating.close();
      }
    } finally {
      await dropSchema(schema);
      await deletePrefix(prefix);
    }
  });
});

describe('through every case above', () => {
  it('no mail was sent and no log line held the API key', () => {
    expect(sim().stats().emails_sent).toBe(0);
    expect(logs.text().length).toBeGreaterThan(0);
    expect(logs.text()).not.toContain(TEST_API_KEY);
  });
});
