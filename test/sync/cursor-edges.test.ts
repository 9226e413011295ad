import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../src/api/client.js';
import { requireService } from '../../src/config/source-config.js';
import { createFeedClient } from '../../src/feed/feed-client.js';
import { setCursor } from '../../src/store/cursor.js';
import { createSync } from '../../src/sync/sync.js';
import { testConfig, testEnv } from '../support/config.js';
import { runCli } from '../support/processes.js';
import { type FeedServer, startFeedServer } from './feed-server.js';
import { captureLogger, cursorOf, type Sandbox, storedCount, useSandboxes } from './harness.js';

const LIMIT = 10;
// Two full pages and a short last one.
const EVENTS = Array.from({ length: 25 }, (_, i) => ({
  id: `ev_${String(i + 1).padStart(3, '0')}`,
  type: 'email.delivered',
  created_at: new Date(Date.UTC(2024, 4, 1, 0, 0, i)).toISOString(),
  data: { email_id: `em_${i + 1}`, to: ['someone@example.com'] },
}));
const id = (n: number): string => EVENTS[n - 1]!.id;

/** The page served after `after` instead of the feed's own: `events` of the feed and this next_after. */
let bad: { after: string; nextAfter: string; events?: number } | null = null;
let feed: FeedServer;
let box: Sandbox;
const sandbox = useSandboxes();

beforeAll(async () => {
  feed = await startFeedServer(EVENTS, {
    rawPage: (after) => {
      if (!bad) return undefined;
      const at = EVENTS.findIndex((e) => e.id === bad?.after);
      // The same bad page read after its cursor or, as a later turn's first request reads
      // (sync/cursor-check.ts), after the event before it: the cursor's event first.
      const start = after === bad.after ? at + 1 : after === EVENTS[at - 1]?.id ? at : -1;
      if (start < 0) return undefined;
      const data = EVENTS.slice(start, start + (bad.events ?? LIMIT));
      return JSON.stringify({ data, next_after: bad.nextAfter });
    },
  });
  box = await sandbox('cursor_edges');
});
afterAll(async () => {
  await feed.close();
});

const env = (source: string) =>
  testEnv(
    { schema: box.schema, prefix: box.prefix, baseUrl: feed.baseUrl },
    { FEED_SOURCE: source, FEED_PAGE_LIMIT: String(LIMIT), PATH: process.env.PATH ?? '' },
  );

describe('a next_after that does not move forward fails the run; the cursor stays before the page', () => {
  it.each([
    {
      name: 'the last, short page points back to a cursor sent before',
      page: { after: id(20), nextAfter: id(10), events: 5 },
      code: /CURSOR_LOOP|points back/,
    },
    {
      name: 'the last, short page points back into the page before',
      page: { after: id(20), nextAfter: id(14), events: 5 },
      code: /CURSOR_LOOP|points back/,
    },
    {
      name: 'a full page points back into the page before (the next page would loop)',
      page: { after: id(10), nextAfter: id(5) },
      code: /CURSOR_LOOP|points back/,
    },
    {
      name: 'a full page whose next_after equals the after sent',
      page: { after: id(10), nextAfter: id(10) },
      code: /CURSOR_STUCK|would not move/,
    },
    {
      name: 'a full page whose next_after is two million characters long',
      page: { after: id(10), nextAfter: `n${'0'.repeat(2_000_000)}` },
      code: /next_after is 2000001 characters long, more than an event id may be \(500\)/,
    },
  ])(
    '$name: exit 1, the page not stored, the cursor where it was',
    async ({ name, page, code }) => {
      const source = name.replace(/[^a-z]+/g, '-');
      bad = page;
      const requestsBefore = feed.queries.length;
      const run = await runCli(['sync', '--once'], env(source), 60_000);
      expect(run.code, run.stderr).toBe(1);
      expect(run.stderr).toMatch(code);
      // A value the feed controls is quoted by its start, never whole.
      expect(run.stdout.length + run.stderr.length).toBeLessThan(20_000);
      // The pages before the bad one commit; the cursor never takes the bad page's value.
      expect(await cursorOf(box.store, source)).toBe(page.after);
      expect(await storedCount(box.store, source)).toBe(EVENTS.findIndex((e) => e.id === page.after) + 1);
      // The bad page was the run's last request: nothing was read from where it points.
      expect(feed.queries.slice(requestsBefore).at(-1)?.get('after')).toBe(page.after);

      // The same failure on every run, never "caught up": the next run fails the same way.
      const again = await runCli(['sync', '--once'], env(source), 60_000);
      expect(again.code).toBe(1);
      expect(await cursorOf(box.store, source)).toBe(page.after);

      // Once the feed behaves, the next run stores the rest, once.
      bad = null;
      const fixed = await runCli(['sync', '--once'], env(source), 60_000);
      expect(fixed.code, fixed.stderr).toBe(0);
      expect(await cursorOf(box.store, source)).toBe(id(EVENTS.length));
      expect(await storedCount(box.store, source)).toBe(EVENTS.length);
    },
    120_000,
  );
});

describe('a cursor moved by hand during a run', () => {
  it('stops the run and says the cursor moved outside it, with where it is now', async () => {
    const logs = captureLogger('info');
    const source = 'moved-by-hand';
    const config = testConfig(
      { schema: box.schema, prefix: box.prefix, baseUrl: feed.baseUrl },
      { FEED_SOURCE: source, FEED_PAGE_LIMIT: String(LIMIT) },
    );
    const client = new ServiceClient({
      ...requireService(config),
      timeoutMs: 10_000,
      maxResponseBytes: 1 << 20,
    });
    const fetchFeed = createFeedClient({
      client,
      limit: LIMIT,
      listField: null,
      types: null,
      retry: { maxRetries: 0, maxRetryWaitMs: 0 },
    });
    let fetched = 0;
    // As `feedsync cursor set ev_020` would, between the run's first fetch and its commit.
    const sync = createSync(config, {
      logger: logs.logger,
      store: box.store,
      fetchPage: async (after, signal) => {
        const page = await fetchFeed(after, signal);
        if (++fetched === 1) await setCursor(box.store, source, id(20));
        return page;
      },
    });
    try {
      const result = await sync.runOnce();
      expect(result.status).toBe('cursor-conflict');
    } finally {
      await sync.close();
      await client.close();
    }
    expect(await cursorOf(box.store, source)).toBe(id(20));
    expect(await storedCount(box.store, source)).toBe(0);
    const line = logs.text();
    expect(line).toContain('the cursor was moved outside this run');
    expect(line).toContain('cursor set');
    expect(line).toContain(`"cursor":"${id(20)}"`);
    expect(line).not.toContain('another worker moved the cursor');
  });
});
