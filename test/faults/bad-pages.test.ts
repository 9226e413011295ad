import { afterAll, beforeAll, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { createSync } from '../../src/sync/sync.js';
import { runCli } from '../support/processes.js';
import { fateOf } from './support/fate.js';
import { type BadPage, type FeedServer, feedEvents, startFeedServer } from './support/feed-server.js';
import { measured } from './support/results.js';
import { type Sandbox, useSandboxes } from './support/sandbox.js';

const EVENTS = feedEvents(1_000);
const LIMIT = 100;
const MAX_BYTES = 32 * 1024;
const FAILING: BadPage[] = [
  'too-many',
  'too-big',
  'not-json',
  'no-list',
  'cursor-loop',
  'back-short',
  'back-full',
  'stuck-full',
];
const PAGES = [3, 5, 8];
const sandbox = useSandboxes();
const logger = createLogger({ level: 'silent' });
let feed: FeedServer;
let box: Sandbox;

beforeAll(async () => {
  feed = await startFeedServer(EVENTS);
  box = await sandbox('bad_pages');
});
afterAll(async () => {
  await feed.close();
});

async function runOnce(source: string) {
  const config = box.config(feed.baseUrl, {
    FEED_SOURCE: source,
    FEED_PAGE_LIMIT: String(LIMIT),
    FEED_MAX_RESPONSE_BYTES: String(MAX_BYTES),
  });
  const sync = createSync(config, { logger, store: box.store, retryDeps: { sleep: async () => {} } });
  try {
    return await sync.runOnce();
  } finally {
    await sync.close();
  }
}

async function storedOf(source: string): Promise<{ ids: string[]; cursor: string | null }> {
  const s = `"${box.schema}"`;
  const { rows } = await box.store.pool.query<{ id: string }>(
    `SELECT id FROM ${s}.events WHERE source = $1 ORDER BY id`,
    [source],
  );
  const cursor = await box.store.pool.query<{ after_id: string | null }>(
    `SELECT after_id FROM ${s}.cursors WHERE source = $1`,
    [source],
  );
  return { ids: rows.map((r) => r.id), cursor: cursor.rows[0]?.after_id ?? null };
}

it('8. pages that break the rules: the run fails or de-duplicates; the cursor never passes a bad page', async () => {
  await measured(
    {
      item: 8,
      title: 'pages that break the rules',
      claim:
        'A page with more events than the limit, over the size limit, not JSON, with no list, or whose next_after ' +
        'points back to a page already read or into the middle of the page before (on a full page, or on the last, ' +
        'short one), or stays at the after sent on a full page, fails the run and the cursor stays before it; the ' +
        'same id twice in one page is stored once. Once the feed behaves again, the next run stores everything, once.',
      method:
        `A feed server on node:http run by the test serves ${EVENTS.length} events in pages of ${LIMIT} ` +
        `(FEED_MAX_RESPONSE_BYTES ${MAX_BYTES}); one page breaks a rule. Each of the ${FAILING.length + 1} kinds is put at page ` +
        `${PAGES.join(', ')} in turn, each on a source of its own (the pages before it are fetched ahead and ` +
        'committed while it is read). After each failing run the bad page is put right and the source synced again. ' +
        'One of them runs through the CLI, for its exit code.',
    },
    async (rec) => {
      rec.injectedWhat = 'bad pages';
      const errors: Record<string, string> = {};
      let cursorPassedBadPage = 0;
      let badPageEventsStored = 0;
      let dedupedInPage = 0;
      let checked = 0;
      let lost = 0;
      let duplicated = 0;
      for (const kind of [...FAILING, 'same-id-twice'] as BadPage[]) {
        for (const page of PAGES) {
          const source = `${kind}-${page}`;
          feed.setBad({ page, kind });
          rec.injected++;
          const goodBefore = EVENTS.slice(0, (page - 1) * LIMIT).map((e) => e.id);
          if (kind === 'same-id-twice') {
            const result = await runOnce(source);
            expect(result.status).toBe('caught-up');
            dedupedInPage += result.duplicates;
          } else if (kind === 'not-json' && page === PAGES[0]) {
            const cli = await runCli(
              ['sync', '--once'],
              box.env(feed.baseUrl, { FEED_SOURCE: source, FEED_PAGE_LIMIT: String(LIMIT) }),
              60_000,
            );
            errors[`${kind} (CLI exit code ${cli.code})`] = /NOT_JSON|not JSON/.test(cli.stdout + cli.stderr)
              ? 'NOT_JSON'
              : 'unexpected';
            expect(cli.code).toBe(1);
          } else {
            const error = await runOnce(source).then(
              () => null,
              (err: { code?: string }) => err,
            );
            expect(error, `${kind} at page ${page} must fail the run`).not.toBeNull();
            errors[kind] = error?.code ?? 'unknown';
          }
          if (kind !== 'same-id-twice') {
            const after = await storedOf(source);
            const expectedCursor = goodBefore.at(-1) ?? null;
            if (after.cursor !== expectedCursor) cursorPassedBadPage++;
            const badIds = new Set(EVENTS.slice((page - 1) * LIMIT, page * LIMIT).map((e) => e.id));
            badPageEventsStored += after.ids.filter((id) => badIds.has(id)).length;
            expect(after.cursor).toBe(expectedCursor);
            expect(after.ids).toEqual(goodBefore);
            feed.setBad(null);
            const fixed = await runOnce(source);
            expect(fixed).toMatchObject({ status: 'caught-up', drained: true });
          }
          feed.setBad(null);
          const fate = await fateOf(box, EVENTS, source);
          checked += fate.served;
          lost += fate.lost;
          duplicated += fate.duplicated;
          expect(fate).toMatchObject({ lost: 0, duplicated: 0, strangers: 0, unpublished: 0 });
        }
      }
      rec.checked = checked;
      rec.lost = lost;
      rec.duplicated = duplicated;
      rec.figures = [
        ...Object.entries(errors).map(([kind, code]): [string, string] => [`error code: ${kind}`, code]),
        ['runs whose cursor did not stay just before the bad page', cursorPassedBadPage],
        ['events of a bad page stored by the failing run', badPageEventsStored],
        ['repeated ids within one page, counted as duplicates and stored once', dedupedInPage],
      ];
      expect(errors).toMatchObject({
        'too-many': 'TOO_MANY',
        'too-big': 'RESPONSE_TOO_LARGE',
        'not-json': 'NOT_JSON',
        'no-list': 'NO_LIST',
        'cursor-loop': 'CURSOR_LOOP',
        'back-short': 'CURSOR_LOOP',
        'back-full': 'CURSOR_LOOP',
        'stuck-full': 'CURSOR_STUCK',
      });
      expect(dedupedInPage).toBe(PAGES.length);
    },
  );
});
