import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceEvent } from '../../src/api/types.js';
import { type Applier, createApplier } from '../../src/store/applier.js';
import type { Store } from '../../src/store/db.js';
import { arrivals, event, migratedStore, route } from './migrated-store.js';

let store: Store;
let dispose: () => Promise<void>;
let applier: Applier;

beforeAll(async () => {
  ({ store, dispose } = await migratedStore('email_status'));
  applier = createApplier(store, route);
});
afterAll(() => dispose());

interface StatusRow {
  email_id: string;
  status: string;
  last_event_id: string;
  last_event_at: string;
  sent_at: string | null;
  delivered_at: string | null;
  bounced_at: string | null;
  complained_at: string | null;
  failed_at: string | null;
  recipients: string[] | null;
}

async function rowsOf(source: string): Promise<StatusRow[]> {
  const { rows } = await store.pool.query(
    `SELECT email_id, status, last_event_id, last_event_at, sent_at, delivered_at, bounced_at, complained_at,
            failed_at, recipients
       FROM ${store.schema}.email_status WHERE source = $1 ORDER BY email_id`,
    [source],
  );
  const iso = (d: Date | null) => (d === null ? null : d.toISOString());
  return rows.map((r) => ({
    ...r,
    last_event_at: iso(r.last_event_at)!,
    sent_at: iso(r.sent_at),
    delivered_at: iso(r.delivered_at),
    bounced_at: iso(r.bounced_at),
    complained_at: iso(r.complained_at),
    failed_at: iso(r.failed_at),
  }));
}

async function applyInOrder(source: string, batches: readonly (readonly ServiceEvent[])[]): Promise<void> {
  for (const events of batches)
    await applier.apply({ source, receivedVia: 'webhook', events, quarantine: [] });
}

const RANK: Record<string, number> = { sent: 1, delivered: 2, bounced: 3, failed: 3, complained: 4 };
const byTimeThenId = (a: ServiceEvent, b: ServiceEvent) =>
  Date.parse(a.created_at) - Date.parse(b.created_at) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** The contract's rules, written plainly, as the oracle. */
function expectedRows(events: readonly ServiceEvent[]): StatusRow[] {
  const mail = events.filter(
    (e) =>
      /^email\.(sent|delivered|bounced|failed|complained)$/.test(e.type) &&
      typeof e.data.email_id === 'string',
  );
  const ids = [...new Set(mail.map((e) => e.data.email_id as string))].sort();
  return ids.map((emailId) => {
    const own = mail.filter((e) => e.data.email_id === emailId).sort(byTimeThenId);
    const status = (e: ServiceEvent) => e.type.slice('email.'.length);
    const top = Math.max(...own.map((e) => RANK[status(e)]!));
    const winner = own.find((e) => RANK[status(e)] === top)!;
    const firstAt = (s: string) => {
      const first = own.find((e) => status(e) === s);
      return first ? new Date(first.created_at).toISOString() : null;
    };
    const recipientsOf = (e: ServiceEvent): string[] | null => {
      const to = e.data.to;
      const list =
        typeof to === 'string' ? [to] : Array.isArray(to) ? to.filter((t) => typeof t === 'string') : [];
      return list.length > 0 ? list : null;
    };
    return {
      email_id: emailId,
      status: status(winner),
      last_event_id: winner.id,
      last_event_at: new Date(winner.created_at).toISOString(),
      sent_at: firstAt('sent'),
      delivered_at: firstAt('delivered'),
      bounced_at: firstAt('bounced'),
      complained_at: firstAt('complained'),
      failed_at: firstAt('failed'),
      recipients: own.map(recipientsOf).find((r) => r !== null) ?? null,
    };
  });
}

describe('email_status projection', () => {
  it('never moves backwards, whatever the order and the batching', async () => {
    const types = ['sent', 'delivered', 'bounced', 'failed', 'complained'].map((t) => `email.${t}`);
    const eventSpec = fc.record({
      type: fc.constantFrom(...types, 'email.opened', 'contact.subscribed'),
      // Few distinct instants, so that ties on created_at are common.
      second: fc.integer({ min: 0, max: 3 }),
      emailId: fc.constantFrom<unknown>('m1', 'm2', 'm1', 'm2', 7, undefined),
      to: fc.constantFrom<unknown>(
        ['a@example.com'],
        ['b@example.com', 'c@example.com'],
        [],
        'd@example.com',
        null,
      ),
    });
    const scenario = arrivals(
      eventSpec,
      (id, s) => {
        const data: Record<string, unknown> = { to: s.to };
        if (s.emailId !== undefined) data.email_id = s.emailId;
        return event(id, s.type, `2024-05-01T00:00:0${s.second}.000Z`, data);
      },
      9,
    );

    let run = 0;
    await fc.assert(
      fc.asyncProperty(scenario, async ({ events, batches }) => {
        run += 1;
        await applyInOrder(`shuffled-${run}`, batches);
        await applyInOrder(
          `sorted-${run}`,
          [...events].sort(byTimeThenId).map((e) => [e]),
        );
        const got = await rowsOf(`shuffled-${run}`);
        expect(got).toEqual(await rowsOf(`sorted-${run}`));
        expect(got).toEqual(expectedRows(events));
      }),
      { numRuns: 120 },
    );
    // 120 runs of a few statements each: about 15 s on a quiet machine, twice that on a busy one.
  }, 120_000);

  const at = (s: number) => `2024-06-01T00:00:0${s}Z`;
  const mail = (id: string, type: string, second: number, to: unknown = ['r@example.com']) =>
    event(id, `email.${type}`, at(second), { email_id: 'tie', to });

  it('breaks a created_at tie between equal ranks by id, the later arrival included', async () => {
    await applyInOrder('tie-1', [[mail('b', 'bounced', 1)], [mail('a', 'failed', 1)]]);
    expect(await rowsOf('tie-1')).toMatchObject([{ status: 'failed', last_event_id: 'a' }]);
    await applyInOrder('tie-2', [[mail('a', 'failed', 1)], [mail('b', 'bounced', 1)]]);
    expect(await rowsOf('tie-2')).toMatchObject([{ status: 'failed', last_event_id: 'a' }]);
  });

  it('lets a higher rank win a created_at tie, even arriving second', async () => {
    await applyInOrder('tie-3', [[mail('z', 'sent', 2)], [mail('a', 'delivered', 2)]]);
    expect(await rowsOf('tie-3')).toMatchObject([
      { status: 'delivered', last_event_id: 'a', sent_at: new Date(at(2)).toISOString() },
    ]);
  });

  it('keeps the earlier of two equal ranks and records both times', async () => {
    await applyInOrder('rank', [
      [mail('e2', 'failed', 3)],
      [mail('e1', 'bounced', 1), mail('e0', 'sent', 0)],
    ]);
    expect(await rowsOf('rank')).toEqual([
      {
        email_id: 'tie',
        status: 'bounced',
        last_event_id: 'e1',
        last_event_at: new Date(at(1)).toISOString(),
        sent_at: new Date(at(0)).toISOString(),
        delivered_at: null,
        bounced_at: new Date(at(1)).toISOString(),
        complained_at: null,
        failed_at: new Date(at(3)).toISOString(),
        recipients: ['r@example.com'],
      },
    ]);
  });

  it('takes recipients from the earliest event that has any', async () => {
    await applyInOrder('rcpt', [
      [mail('r3', 'delivered', 3, ['late@example.com'])],
      [mail('r1', 'sent', 1, [])],
    ]);
    expect(await rowsOf('rcpt')).toMatchObject([{ recipients: ['late@example.com'] }]);
    await applyInOrder('rcpt', [[mail('r2', 'sent', 2, ['early@example.com'])]]);
    expect(await rowsOf('rcpt')).toMatchObject([{ status: 'delivered', recipients: ['early@example.com'] }]);
  });

  it('stores events without a string email_id but leaves email_status alone', async () => {
    const result = await applier.apply({
      source: 'no-id',
      receivedVia: 'feed',
      events: [
        event('n1', 'email.sent', at(0), { to: ['x@example.com'] }),
        event('n2', 'email.delivered', at(1), { email_id: 42 }),
        event('n3', 'email.bounced', at(2), { email_id: { id: 'x' } }),
      ],
      quarantine: [],
    });
    expect(result.inserted).toHaveLength(3);
    expect(await rowsOf('no-id')).toEqual([]);
  });
});
