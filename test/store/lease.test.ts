import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplier } from '../../src/store/applier.js';
import { ensureCursor, getCursor, setCursor } from '../../src/store/cursor.js';
import type { Store } from '../../src/store/db.js';
import { claimDue, takeLease } from '../../src/store/lease.js';
import { LeaseLostError } from '../../src/store/lease-renewal.js';
import { ensureLeaseRows } from '../../src/store/lease-statements.js';
import { TEST_DATABASE_URL } from '../support/postgres.js';
import { waitFor } from '../support/processes.js';
import { event, migratedStore, route } from './migrated-store.js';

let store: Store;
let dispose: () => Promise<void>;
const A = { holder: 'host-a/1', leaseMs: 60_000 };
const B = { holder: 'host-b/2', leaseMs: 60_000 };

beforeAll(async () => {
  ({ store, dispose } = await migratedStore('lease'));
});
afterAll(() => dispose());

/** Waits until a statement of this store's database waits for a lock on a row of `table`. */
async function waitForLock(store: Store, table: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const { rows } = await store.pool.query(
      `SELECT FROM pg_locks l JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = $1 AND c.relname = $2 AND l.granted AND l.mode = 'RowShareLock'`,
      [store.schema, table],
    );
    if (rows.length > 0) return;
    await sleep(50);
  }
  throw new Error(`no statement locked a row of ${table}`);
}

/** Ends the lease of `source` now, as SOURCE_LEASE_MS passing without a renewal would. */
async function expire(source: string): Promise<void> {
  await store.pool.query(`UPDATE ${store.schema}.leases SET expires_at = now() WHERE source = $1`, [source]);
}

describe('takeLease', () => {
  it('lets one holder have a source; another gets null until it is given back', async () => {
    const first = await takeLease(store, 'acct', A);
    expect(first).not.toBeNull();
    expect(await takeLease(store, 'acct', B)).toBeNull();
    // Other sources are independent.
    const unrelated = await takeLease(store, 'acct-2', B);
    expect(unrelated).not.toBeNull();

    await first!.release();
    await first!.release();
    expect(first!.lost).toBe(false);
    const second = await takeLease(store, 'acct', B);
    expect(second).not.toBeNull();
    // Every new holder has a larger token.
    expect(BigInt(second!.token)).toBeGreaterThan(BigInt(first!.token));
    await second!.release();
    await unrelated!.release();
  });

  it("waits out a statement that locks a free row (a dead holder's commit still running), then takes it", async () => {
    await ensureLeaseRows(store, ['locked-free']);
    const blocker = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await blocker.connect();
    try {
      await blocker.query('BEGIN');
      await blocker.query(`SELECT FROM ${store.schema}.leases WHERE source = 'locked-free' FOR KEY SHARE`);
      const taking = takeLease(store, 'locked-free', A);
      await sleep(300);
      await blocker.query('COMMIT');
      const lease = await taking;
      expect(lease).not.toBeNull();
      await lease!.release();
    } finally {
      await blocker.end();
    }
    // A row held by a live holder is still refused at once.
    const holder = await takeLease(store, 'locked-free', A);
    const started = performance.now();
    expect(await takeLease(store, 'locked-free', B)).toBeNull();
    expect(performance.now() - started).toBeLessThan(1_000);
    await holder!.release();
  });

  it('a lease that ran out is free to anyone; the old holder learns it at its next renewal', async () => {
    const short = { holder: 'host-a/1', leaseMs: 1_500 };
    const first = await takeLease(store, 'frozen', short);
    expect(first).not.toBeNull();
    await expire('frozen');
    const taker = await takeLease(store, 'frozen', B);
    expect(taker).not.toBeNull();
    // The renewal, at a third of the lease, finds another token.
    await new Promise((resolve) => first!.signal.addEventListener('abort', resolve, { once: true }));
    expect(first!.lost).toBe(true);
    expect(first!.signal.reason).toBeInstanceOf(LeaseLostError);
    // Giving back a lost lease leaves the new holder alone.
    await first!.release();
    expect(await takeLease(store, 'frozen', A)).toBeNull();
    await taker!.release();
  });

  it('is not renewed once its turn shows no progress for stallMs; progress keeps it', async () => {
    const lease = await takeLease(store, 'stalling', { holder: 'host-a/1', leaseMs: 900, stallMs: 1_200 });
    for (let i = 0; i < 8; i++) {
      await sleep(250);
      lease!.progress();
    }
    expect(lease!.lost).toBe(false);
    expect(lease!.stalled).toBe(false);
    await new Promise((resolve) => lease!.signal.addEventListener('abort', resolve, { once: true }));
    expect(lease!.stalled).toBe(true);
    expect(String(lease!.signal.reason)).toContain('its turn made no progress for 1200 ms');
    // Not renewed: once it runs out, another worker takes the source.
    await waitFor(async () => await takeLease(store, 'stalling', B), {
      what: 'the lease to run out',
      timeoutMs: 5_000,
    });
  });

  it('is renewed while held: it outlives its length', async () => {
    const lease = await takeLease(store, 'renewed', { holder: 'host-a/1', leaseMs: 1_000 });
    await sleep(2_500);
    expect(lease!.lost).toBe(false);
    expect(await takeLease(store, 'renewed', B)).toBeNull();
    await lease!.release();
  });
});

describe('fencing', () => {
  it('a page committed with a token that is no longer the lease keeps nothing', async () => {
    const applier = createApplier(store, route);
    await ensureCursor(store, 'fenced', null);
    const old = await takeLease(store, 'fenced', A);
    await expire('fenced');
    const now = await takeLease(store, 'fenced', B);
    const page = {
      source: 'fenced',
      receivedVia: 'feed' as const,
      events: [event('e1', 'email.sent', '2024-01-01T00:00:00Z', { email_id: 'm1' })],
      quarantine: [{ raw: 'x', reason: 'bad' }],
      cursor: { prev: null, next: 'e1' },
    };
    const stale = await applier.apply({ ...page, leaseToken: old!.token });
    expect(stale.status).toBe('lease-lost');
    const { rows } = await store.pool.query(
      `SELECT (SELECT count(*) FROM ${store.schema}.events WHERE source = 'fenced')::int AS events,
              (SELECT count(*) FROM ${store.schema}.quarantine WHERE source = 'fenced')::int AS quarantined`,
    );
    expect(rows[0]).toEqual({ events: 0, quarantined: 0 });
    expect((await getCursor(store, 'fenced'))!.afterId).toBeNull();

    const fresh = await applier.apply({ ...page, leaseToken: now!.token });
    expect(fresh).toMatchObject({ status: 'applied', quarantined: 1 });
    expect((await getCursor(store, 'fenced'))!.afterId).toBe('e1');
    await old!.release();
    await now!.release();
  });

  it("a commit in flight never holds back its own holder's renewal, and a taker still skips the row", async () => {
    const applier = createApplier(store, route);
    await ensureCursor(store, 'slow-commit', null);
    const lease = await takeLease(store, 'slow-commit', { holder: 'host-a/1', leaseMs: 900 });
    // Another session holds the cursor row, so the commit takes the lease row's lock and waits there.
    const blocker = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await blocker.connect();
    try {
      await blocker.query('BEGIN');
      await blocker.query(`SELECT FROM ${store.schema}.cursors WHERE source = 'slow-commit' FOR UPDATE`);
      const commit = applier.apply({
        source: 'slow-commit',
        receivedVia: 'feed',
        events: [event('s1', 'email.sent', '2024-01-01T00:00:00Z', { email_id: 'm1' })],
        quarantine: [],
        cursor: { prev: null, next: 's1' },
        leaseToken: lease!.token,
      });
      await waitForLock(store, 'leases');
      // Three lease lengths: renewals at a third of it land while the commit waits.
      await sleep(2_700);
      expect(lease!.lost).toBe(false);
      await store.pool.query(
        `UPDATE ${store.schema}.leases SET expires_at = now() WHERE source = 'slow-commit'`,
      );
      expect(await takeLease(store, 'slow-commit', B)).toBeNull();
      await blocker.query('ROLLBACK');
      expect(await commit).toMatchObject({ status: 'applied' });
    } finally {
      await blocker.end();
    }
    await lease!.release();
  });

  it('a cursor move with a stale token does not land', async () => {
    const old = await takeLease(store, 'moved', A);
    await expire('moved');
    const now = await takeLease(store, 'moved', B);
    expect(await setCursor(store, 'moved', 'x', undefined, old!.token)).toBe(false);
    expect(await getCursor(store, 'moved')).toBeNull();
    expect(await setCursor(store, 'moved', 'y', undefined, now!.token)).toBe(true);
    expect((await getCursor(store, 'moved'))!.afterId).toBe('y');
    await old!.release();
    await now!.release();
  });
});

describe('claimDue', () => {
  it('claims due sources most overdue first, never one held, and none twice', async () => {
    const names = ['c1', 'c2', 'c3', 'c4'];
    await ensureLeaseRows(store, names);
    // c3 was due longest ago, then c1; c2 is not due yet; c4 is held.
    await store.pool.query(
      `UPDATE ${store.schema}.leases SET due_at = CASE source
         WHEN 'c1' THEN now() - interval '1 minute' WHEN 'c2' THEN now() + interval '1 hour'
         WHEN 'c3' THEN now() - interval '2 minutes' ELSE NULL END
       WHERE source = ANY($1)`,
      [names],
    );
    const held = await takeLease(store, 'c4', B);
    const [first, ...rest] = await Promise.all([
      claimDue(store, 1, A, { only: names }),
      claimDue(store, 5, { ...A, holder: 'host-c/3' }, { only: names }),
    ]);
    const all = [...first!.leases, ...rest.flatMap((c) => c.leases)];
    expect(all.map((l) => l.source).sort()).toEqual(['c1', 'c3']);
    for (const lease of all) await lease.release({ dueInMs: 60_000 });
    expect((await claimDue(store, 5, A, { only: names })).leases).toEqual([]);

    // A holder whose lease ran out in the middle of a turn: its source is due at once.
    await expire('c4');
    const again = (await claimDue(store, 5, A, { only: names })).leases;
    expect(again.map((l) => l.source)).toEqual(['c4']);
    expect(held!.token).not.toBe(again[0]!.token);
    await again[0]!.release();
    await held!.release();
  });

  it('a token at the int8 maximum wraps: the claim takes it and the sources beside it, and fences the old holder', async () => {
    const names = ['corrupt', 'beside'];
    await ensureLeaseRows(store, names);
    await store.pool.query(
      `UPDATE ${store.schema}.leases SET token = 9223372036854775807, due_at = now() - interval '1 minute' WHERE source = ANY($1)`,
      [names],
    );
    const { leases: claimed } = await claimDue(store, 5, A, { only: names });
    expect(claimed.map((l) => [l.source, l.token]).sort()).toEqual([
      ['beside', '1'],
      ['corrupt', '1'],
    ]);
    for (const lease of claimed) await lease.release();
    await store.pool.query(
      `UPDATE ${store.schema}.leases SET token = 9223372036854775807 WHERE source = 'corrupt'`,
    );
    const taken = await takeLease(store, 'corrupt', B);
    expect(taken?.token).toBe('1');
    await taken!.release();
  });

  it('claims sources whose names need quoting in an array literal', async () => {
    const names = ['q"uote', 'back\\slash', 'with space', 'com,ma', '{brace}', 'NULL', 'ünï😀'];
    await ensureLeaseRows(store, names);
    const { leases: claimed } = await claimDue(store, names.length, A, { only: names });
    expect(claimed.map((l) => l.source).sort()).toEqual([...names].sort());
    for (const lease of claimed) await lease.release({ dueInMs: 60_000 });
  });

  it('counts failed turns in a row and forgets them after a good one', async () => {
    await ensureLeaseRows(store, ['f']);
    let lease = (await claimDue(store, 1, A, { only: ['f'] })).leases[0]!;
    expect(lease.failures).toBe(0);
    await lease.release({ failed: true });
    lease = (await claimDue(store, 1, A, { only: ['f'] })).leases[0]!;
    expect(lease.failures).toBe(1);
    await lease.release();
    lease = (await claimDue(store, 1, A, { only: ['f'] })).leases[0]!;
    expect(lease.failures).toBe(0);
    await lease.release();
  });

  it('claims over every lease row in the order they fall due, with the cursor, naming no source', async () => {
    const own = await migratedStore('lease_all');
    try {
      const s = own.store;
      await ensureLeaseRows(s, ['n1', 'n2', 'n3']);
      await ensureCursor(s, 'n2', ['email.bounced']);
      await s.pool.query(
        `UPDATE ${s.schema}.leases SET due_at = CASE source WHEN 'n1' THEN now() - interval '1 minute'
           WHEN 'n2' THEN now() - interval '2 minutes' ELSE now() + interval '5 seconds' END`,
      );
      const first = await claimDue(s, 5, A);
      expect(first.leases.map((l) => [l.source, l.cursor])).toEqual([
        ['n2', { afterId: null, types: ['email.bounced'], keyKind: null, check: null }],
        ['n1', null],
      ]);
      // n3 falls due in about 5 s: the loop's sleep.
      expect(first.nextDueInMs).toBeGreaterThan(3_000);
      expect(first.nextDueInMs).toBeLessThanOrEqual(5_000);
      // A source left out (not in this worker's file) is neither claimed nor waited for.
      await s.pool.query(`UPDATE ${s.schema}.leases SET due_at = NULL WHERE source = 'n3'`);
      // The next one due is then a held lease's end (n1, n2: a minute).
      const left = await claimDue(s, 5, A, { except: ['n3'] });
      expect(left.leases).toEqual([]);
      expect(left.nextDueInMs).toBeGreaterThan(50_000);
      // Given back as found: due time and failures untouched.
      const [n3] = (await claimDue(s, 5, A)).leases;
      await n3!.putBack();
      const { rows } = await s.pool.query(
        `SELECT holder, due_at, failures FROM ${s.schema}.leases WHERE source = 'n3'`,
      );
      expect(rows[0]).toEqual({ holder: null, due_at: null, failures: 0 });
      for (const lease of first.leases)
        await lease.release({ dueInMs: 60_000, succeeded: lease.source === 'n2' });
      expect((await getCursor(s, 'n2'))?.lastSuccessAt).toBeInstanceOf(Date);
      // A turn that did not catch up records no success; a cursor made later has none yet.
      await ensureCursor(s, 'n1', null);
      expect((await getCursor(s, 'n1'))?.lastSuccessAt).toBeNull();
    } finally {
      await own.dispose();
    }
  });
});

describe('takeLease', () => {
  it('makes a missing lease row and takes it, with the cursor, in one call', async () => {
    await ensureCursor(store, 'fresh', null);
    const lease = await takeLease(store, 'fresh', A);
    expect(lease?.cursor).toEqual({ afterId: null, types: null, keyKind: null, check: null });
    expect(lease?.token).toBe('1');
    await lease!.release({ succeeded: true });
    expect((await getCursor(store, 'fresh'))?.lastSuccessAt).toBeInstanceOf(Date);
  });
});
