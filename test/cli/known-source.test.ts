import { beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/processes.js';
import { cursorOf, type Sandbox, storedCount } from '../sync/harness.js';
import { useCliSandbox } from './cli-sandbox.js';

const { sim, box: sandbox, env } = useCliSandbox('known_source');
let box: Sandbox;

/** Every row any table holds for a source: a refused name must leave none. */
async function rowsOf(source: string): Promise<number> {
  const s = box.schema;
  const { rows } = await box.store.pool.query<{ n: number }>(
    `SELECT ((SELECT count(*) FROM ${s}.events WHERE source = $1) + (SELECT count(*) FROM ${s}.cursors WHERE source = $1)
      + (SELECT count(*) FROM ${s}.leases WHERE source = $1) + (SELECT count(*) FROM ${s}.outbox WHERE source = $1)
      + (SELECT count(*) FROM ${s}.source_counts WHERE source = $1))::int AS n`,
    [source],
  );
  return rows[0]!.n;
}

beforeAll(async () => {
  box = sandbox();
  sim().setBacklog(40);
  const first = await runCli(['sync', '--once'], env());
  expect(first.code, first.stderr).toBe(0);
  // A second source, started the one way a new name starts: as FEED_SOURCE.
  const other = await runCli(['sync', '--once'], env({ FEED_SOURCE: 'billing' }));
  expect(other.code, other.stderr).toBe(0);
}, 60_000);

describe('--source without a sources file', () => {
  it('sync --once --source with a typo exits 2, suggests the near name, and stores nothing', async () => {
    const before = await storedCount(box.store);
    const r = await runCli(['sync', '--once', '--source', 'defualt'], env());
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toEqual([
      'feedsync: --source "defualt" is no known source: not FEED_SOURCE ("default"), and no cursor is stored ' +
        'for it; did you mean "default"? To start a new source, set FEED_SOURCE (or list it in FEED_SOURCES_FILE)',
    ]);
    expect(await rowsOf('defualt')).toBe(0);
    expect(await storedCount(box.store)).toBe(before);
    // A near name among the stored sources, not only FEED_SOURCE.
    const near = await runCli(['sync', '--once', '--source', 'biling'], env());
    expect(near.code).toBe(2);
    expect(near.stderr).toContain('did you mean "billing"?');
  });

  it.each([
    [['status']],
    [['doctor']],
    [['cursor', 'show']],
    [['cursor', 'reset']],
    [['cursor', 'set', 'evt_1']],
    [['requeue', '--since', '1h']],
    [['reconcile']],
    [['suppressions', 'list']],
    [['suppressions', 'remove', 'a@example.com']],
    [
      [
        'send',
        '--from',
        'app@example.com',
        '--to',
        'a@example.com',
        '--subject',
        's',
        '--html',
        'h',
        '--allow-suppressed',
      ],
    ],
  ])('%j --source nope exits 2 and changes nothing', async (args) => {
    const sent = sim().stats().emails_sent;
    const r = await runCli([...args, '--source', 'nope'], env());
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain('--source "nope" is no known source');
    expect(r.stdout).toBe('');
    expect(await rowsOf('nope')).toBe(0);
    expect(sim().stats().emails_sent).toBe(sent);
  });

  it('FEED_SOURCE and a source with a stored cursor are known', async () => {
    for (const source of ['default', 'billing']) {
      const status = await runCli(['status', '--source', source, '--json'], env());
      expect(status.code, status.stderr).toBe(0);
      const cursor = await runCli(['cursor', 'show', '--source', source], env());
      expect(cursor.code, cursor.stderr).toBe(0);
    }
    expect(await cursorOf(box.store, 'billing')).not.toBeNull();
    const sync = await runCli(['sync', '--once', '--source', 'billing'], env());
    expect(sync.code, sync.stderr).toBe(0);
    // A new name given as FEED_SOURCE is known by that alone.
    const fresh = await runCli(['sync', '--once', '--source', 'newcomer'], env({ FEED_SOURCE: 'newcomer' }));
    expect(fresh.code, fresh.stderr).toBe(0);
  });
});
