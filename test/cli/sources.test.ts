import { beforeAll, describe, expect, it } from 'vitest';
import { overdueSources } from '../../src/store/lease-statements.js';
import { runCli } from '../support/processes.js';
import { cursorOf, type Sandbox, storedCount } from '../sync/harness.js';
import { useCliSandbox } from './cli-sandbox.js';

const { sim, box: sandbox, env } = useCliSandbox('cli_sources');
let box: Sandbox;
const as = (source: string) => env({ FEED_SOURCE: source });

async function rowsOf(source: string): Promise<Record<string, number>> {
  const s = box.schema;
  const tables = ['leases', 'cursors', 'events', 'outbox', 'suppressions', 'contact_status', 'source_counts'];
  const counts: Record<string, number> = {};
  for (const t of tables) {
    const { rows } = await box.store.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${s}.${t} WHERE source = $1`,
      [source],
    );
    counts[t] = rows[0]!.n;
  }
  return counts;
}

async function statusSources(): Promise<string[]> {
  const r = await runCli(['status', '--json', '--all'], env());
  expect(r.code, r.stderr).toBe(0);
  const report = JSON.parse(r.stdout) as { summary: { sources: number }; sources: { source: string }[] };
  expect(report.summary.sources).toBe(report.sources.length);
  return report.sources.map((s) => s.source).sort();
}

beforeAll(async () => {
  box = sandbox();
  sim().setBacklog(30);
  sim().emitContactEvent('contact.unsubscribed', 'gone@example.com');
  for (const source of ['default', 'acme', 'typo']) {
    const r = await runCli(['sync', '--once'], as(source));
    expect(r.code, r.stderr).toBe(0);
  }
}, 60_000);

describe('feedsync sources', () => {
  it('rename moves the cursor and the records: the new name reads and publishes nothing again, and its suppressions guard send', async () => {
    const before = await rowsOf('acme');
    const cursor = await cursorOf(box.store, 'acme');
    expect(before.events).toBe(31);
    const r = await runCli(['sources', 'rename', 'acme', 'acme-eu'], env());
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^renamed source acme to acme-eu: moved 1 cursors, 31 events, /);
    expect(Object.values(await rowsOf('acme')).every((n) => n === 0)).toBe(true);
    expect(await cursorOf(box.store, 'acme-eu')).toBe(cursor);
    const after = await rowsOf('acme-eu');
    expect({ ...after, leases: before.leases }).toEqual(before);

    const sync = await runCli(['sync', '--once'], as('acme-eu'));
    expect(sync.code, sync.stderr).toBe(0);
    expect(await storedCount(box.store, 'acme-eu')).toBe(31);
    expect((await rowsOf('acme-eu')).outbox).toBe(before.outbox);

    const sent = sim().stats().emails_sent;
    const send = await runCli(
      [
        'send',
        '--from',
        'app@example.com',
        '--to',
        'gone@example.com',
        '--subject',
        's',
        '--html',
        'h',
        '--source',
        'acme-eu',
      ],
      env(),
    );
    expect(send.code).toBe(2);
    expect(send.stderr).toContain('suppressed for source acme-eu: gone@example.com (unsubscribed');
    expect(sim().stats().emails_sent).toBe(sent);
  });

  it('retire takes a source out of status and the overdue count, and keeps its events', async () => {
    // Overdue: due for longer than any interval, as a source gone from a watched file stays.
    await box.store.pool.query(
      `UPDATE ${box.schema}.leases SET due_at = now() - interval '1 day', last_turn = 'watch' WHERE source = 'typo'`,
    );
    expect(await statusSources()).toContain('typo');
    const overdue = await overdueSources(box.store, 60_000);
    expect(overdue).toBeGreaterThanOrEqual(1);

    const r = await runCli(['sources', 'retire', 'typo'], env());
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /^retired source typo: lease row deleted, cursor deleted, 0 quarantined and 0 conflict rows deleted/,
    );
    expect(await statusSources()).not.toContain('typo');
    expect(await overdueSources(box.store, 60_000)).toBe(overdue - 1);
    expect(await rowsOf('typo')).toMatchObject({ leases: 0, cursors: 0, source_counts: 0, events: 31 });
  });

  it('a retired or renamed name is refused by a worker still configured with it until sources reuse lifts the mark', async () => {
    for (const [source, said] of [
      ['typo', 'source typo was retired'],
      ['acme', 'source acme was renamed to acme-eu'],
    ] as const) {
      const stale = await runCli(['sync', '--once'], as(source));
      expect(stale.code).toBe(2);
      expect(stale.stderr).toContain(said);
      expect(await rowsOf(source)).toMatchObject({ cursors: 0 });
    }
    const reuse = await runCli(['sources', 'reuse', 'typo'], env());
    expect(reuse.code, reuse.stderr).toBe(0);
    const again = await runCli(['sources', 'reuse', 'typo'], env());
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('was never renamed or retired');
    const sync = await runCli(['sync', '--once'], as('typo'));
    expect(sync.code, sync.stderr).toBe(0);
    expect(await rowsOf('typo')).toMatchObject({ cursors: 1 });
    // Taken out again, for the cases below.
    expect((await runCli(['sources', 'retire', 'typo'], env())).code).toBe(0);
  });

  it.each([
    ['retire FEED_SOURCE', ['sources', 'retire', 'default'], 2, 'still in FEED_SOURCE'],
    ['retire an unknown source', ['sources', 'retire', 'never-was'], 2, 'no lease row and no cursor'],
    ['rename to a name in use', ['sources', 'rename', 'acme-eu', 'default'], 2, 'already has rows'],
    ['rename to a name Postgres cannot carry', ['sources', 'rename', 'acme-eu', 'a\u0001b'], 2, 'source'],
    ['no subcommand', ['sources'], 2, 'Usage: feedsync sources'],
  ])('%s: refused, nothing changed', async (_name, args, code, message) => {
    const before = await rowsOf('acme-eu');
    const r = await runCli(args, env());
    expect(r.code).toBe(code);
    expect(r.stderr).toContain(message);
    expect(await rowsOf('acme-eu')).toEqual(before);
  });

  it('refuses while a worker holds the lease (exit 1), and while events wait in the outbox (exit 2)', async () => {
    const s = box.schema;
    await box.store.pool.query(
      `UPDATE ${s}.leases SET holder = 'other:1', expires_at = now() + interval '1 hour' WHERE source = 'acme-eu'`,
    );
    const held = await runCli(['sources', 'retire', 'acme-eu'], env());
    expect(held.code).toBe(1);
    expect(held.stderr).toContain('is being synced by other:1');
    await box.store.pool.query(
      `UPDATE ${s}.leases SET holder = NULL, expires_at = now() WHERE source = 'acme-eu'`,
    );
    await box.store.pool.query(
      `UPDATE ${s}.outbox SET published_at = NULL WHERE seq = (SELECT max(seq) FROM ${s}.outbox WHERE source = 'acme-eu')`,
    );
    const backlog = await runCli(['sources', 'retire', 'acme-eu'], env());
    expect(backlog.code).toBe(2);
    expect(backlog.stderr).toContain('1 events in its outbox not yet handed to the queues');
    expect((await rowsOf('acme-eu')).cursors).toBe(1);
  });
});
