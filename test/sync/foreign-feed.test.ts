import { afterAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../src/simulator/index.js';
import { testEnv } from '../support/config.js';
import { killChildren, runCli } from '../support/processes.js';
import { startTestSimulator, TEST_API_KEY, useSimulator } from '../support/simulator.js';
import { cursorOf, EMAIL_QUEUE, queuedJobIds, type Sandbox, storedCount, useSandboxes } from './harness.js';

/**
 * A source fed another account's feed: after the simulator restarted, with another
 * account's key, or with a key of the other kind. The CLI over HTTP, against the real
 * Postgres and Redis: the run stops with exit 5 (FOREIGN_FEED) or 2 (KEY_KIND_CHANGED),
 * one line naming the likely cause, and nothing of the page stored or enqueued.
 */
const BACKLOG = 150;
const sim = useSimulator({ backlog: BACKLOG });
const sandbox = useSandboxes();
const restarted: Simulator[] = [];
afterAll(async () => {
  await killChildren();
  for (const s of restarted) await s.close();
});

const OTHER_ACCOUNT = 'sim_test_another0account';
const LIVE_KEY = 'sim_live_0123456789abcdef';
const outputs: string[] = [];

async function cli(args: string[], env: Record<string, string>) {
  const res = await runCli(args, env);
  outputs.push(res.stdout, res.stderr);
  return res;
}

async function conflictsOf(box: Sandbox): Promise<number> {
  const { rows } = await box.store.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${box.schema}".conflicts`,
  );
  return rows[0]!.n;
}

describe('a feed of another account under a source', () => {
  it('after the simulator restarted, cursor reset then sync stops with exit 5 and stores nothing', async () => {
    const box = await sandbox('foreign_restart');
    const env = testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl });
    expect((await cli(['sync', '--once'], env)).code).toBe(0);
    const cursor = await cursorOf(box.store);

    // The same key against a simulator started again: the same ids, other content.
    const again = await startTestSimulator({ backlog: BACKLOG, now: () => Date.now() - 3_600_000 });
    restarted.push(again);
    const envAgain = { ...env, FEED_BASE_URL: again.baseUrl };
    expect((await cli(['cursor', 'reset'], envAgain)).code).toBe(0);
    const run = await cli(['sync', '--once'], envAgain);
    expect(run.code, run.stderr).toBe(5);
    const lines = run.stderr.trim().split('\n');
    expect(lines.filter((l) => l.includes('were stored before with other content'))).toHaveLength(1);
    expect(run.stderr).toContain('100 of the 100 events of a page');
    expect(run.stderr).toMatch(
      /another account's key.*simulator restarted.*cursor reset against another feed/,
    );
    // Nothing of the page: no event, no conflict row, no job, and the cursor still at the start.
    expect(await storedCount(box.store)).toBe(BACKLOG);
    expect(await conflictsOf(box)).toBe(0);
    expect(await queuedJobIds(box.prefix, EMAIL_QUEUE)).toHaveLength(BACKLOG);
    expect(await cursorOf(box.store)).toBeNull();
    expect(cursor).not.toBeNull();
    // status --json shows the failure as the source's last error.
    const status = await cli(['status', '--json'], envAgain);
    expect(status.stdout).toContain('were stored before with other content');
  });

  /**
   * The simulator restarted on its port, with `backlog` events, as a user restarts it:
   * the same ids from the start, other content (another hour).
   */
  async function restartOnItsPort(first: Simulator, backlog: number): Promise<Simulator> {
    const port = Number(new URL(first.baseUrl).port);
    await first.close();
    const again = await startTestSimulator({ port, backlog, now: () => Date.now() - 3_600_000 });
    restarted.push(again);
    return again;
  }

  it('after the simulator restarted, a sync whose cursor the new feed knows stops with exit 5 and stores nothing', async () => {
    const box = await sandbox('foreign_known_cursor');
    const first = await startTestSimulator({ backlog: BACKLOG });
    const env = testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: first.baseUrl });
    expect((await cli(['sync', '--once'], env)).code).toBe(0);
    const cursor = await cursorOf(box.store);
    // More events than before: the cursor's id is in the new feed, and new ones after it.
    await restartOnItsPort(first, BACKLOG + 50);
    const run = await cli(['sync', '--once'], env);
    expect(run.code, run.stderr).toBe(5);
    expect(run.stderr).toContain(
      `the feed serves the cursor's event ${cursor} with other content than stored`,
    );
    expect(run.stderr).toMatch(/a simulator restarted since, or another account's key in FEED_API_KEY/);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expect(await storedCount(box.store)).toBe(BACKLOG);
    expect(await conflictsOf(box)).toBe(0);
    expect(await queuedJobIds(box.prefix, EMAIL_QUEUE)).toHaveLength(BACKLOG);
    expect(await cursorOf(box.store)).toBe(cursor);
  });

  it('after the simulator restarted, a sync whose cursor the new feed does not know stops with exit 5, not "cursor reset"', async () => {
    const box = await sandbox('foreign_unknown_cursor');
    const first = await startTestSimulator({ backlog: BACKLOG });
    const env = testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: first.baseUrl });
    expect((await cli(['sync', '--once'], env)).code).toBe(0);
    const cursor = await cursorOf(box.store);
    // Fewer events than before: the new feed has no event of the cursor's id.
    await restartOnItsPort(first, 50);
    const run = await cli(['sync', '--once'], env);
    expect(run.code, run.stderr).toBe(5);
    expect(run.stderr).toContain(
      `the feed does not know the cursor's event ${cursor}, and serves 50 of the 50 stored events of its first page with other content`,
    );
    expect(run.stderr).not.toContain('cursor reset');
    expect(await storedCount(box.store)).toBe(BACKLOG);
    expect(await conflictsOf(box)).toBe(0);
    expect(await cursorOf(box.store)).toBe(cursor);
  });

  it('a caught-up turn against the same simulator checks the cursor and stores nothing new', async () => {
    const box = await sandbox('same_feed');
    const env = testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl });
    expect((await cli(['sync', '--once'], env)).code).toBe(0);
    const { rows } = await box.store.pool.query<{ check_before: string; check_digest: string | null }>(
      `SELECT check_before, check_digest FROM "${box.schema}".cursors`,
    );
    expect(rows[0]?.check_digest).toMatch(/^[0-9a-f]{64}$/);
    const again = await cli(['sync', '--once'], env);
    expect(again.code, again.stderr).toBe(0);
    expect(await storedCount(box.store)).toBe(BACKLOG);
    expect(await conflictsOf(box)).toBe(0);
  });

  it("another account's key of the same kind: exit 5; its own FEED_SOURCE syncs it", async () => {
    const box = await sandbox('foreign_account');
    const env = testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl });
    expect((await cli(['sync', '--once'], env)).code).toBe(0);
    const other = { ...env, FEED_API_KEY: OTHER_ACCOUNT };
    expect((await cli(['cursor', 'reset'], other)).code).toBe(0);
    const run = await cli(['sync', '--once'], other);
    expect(run.code, run.stderr).toBe(5);
    expect(await storedCount(box.store)).toBe(BACKLOG);
    expect(await conflictsOf(box)).toBe(0);

    const own = await cli(['sync', '--once'], { ...other, FEED_SOURCE: 'another' });
    expect(own.code, own.stderr).toBe(0);
    expect(await storedCount(box.store, 'another')).toBe(BACKLOG);
  });

  it('a key of the other kind is refused (exit 2) until cursor reset --allow-key-change', async () => {
    const box = await sandbox('foreign_kind');
    const env = testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl });
    expect((await cli(['sync', '--once'], env)).code).toBe(0);
    const kind = await box.store.pool.query<{ key_kind: string }>(
      `SELECT key_kind FROM "${box.schema}".cursors`,
    );
    expect(kind.rows).toEqual([{ key_kind: 'test' }]);

    const live = { ...env, FEED_API_KEY: LIVE_KEY };
    const refused = await cli(['sync', '--once'], live);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(
      'FEED_API_KEY is a live key, but the cursor of source "default" was built with a test key',
    );
    expect(refused.stderr).toContain('cursor reset --source default --allow-key-change');
    // A plain reset keeps the kind: still refused.
    expect((await cli(['cursor', 'reset'], live)).code).toBe(0);
    expect((await cli(['sync', '--once'], live)).code).toBe(2);

    const reset = await cli(['cursor', 'reset', '--allow-key-change'], live);
    expect(reset.code, reset.stderr).toBe(0);
    expect(reset.stdout).toContain('the next run records the kind of its key');
    // The live account's feed repeats the test account's ids with other content: the
    // conflict guard still refuses to mix it in, and the kind is recorded as live.
    const run = await cli(['sync', '--once'], live);
    expect(run.code, run.stderr).toBe(5);
    const after = await box.store.pool.query(`SELECT key_kind FROM "${box.schema}".cursors`);
    expect(after.rows).toEqual([{ key_kind: 'live' }]);
  });

  it('never printed a key', () => {
    const all = outputs.join('\n');
    for (const key of [TEST_API_KEY, OTHER_ACCOUNT, LIVE_KEY]) expect(all).not.toContain(key);
  });
});
