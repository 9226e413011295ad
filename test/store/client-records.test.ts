import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceEvent } from '../../src/api/types.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import { type Applier, createApplier } from '../../src/store/applier.js';
import type { Store } from '../../src/store/db.js';
import { addRefusingTrigger } from '../support/poison-items.js';
import { arrivals, event, migratedStore, route } from './migrated-store.js';

let store: Store;
let dispose: () => Promise<void>;
let applier: Applier;

beforeAll(async () => {
  ({ store, dispose } = await migratedStore('client_records'));
  applier = createApplier(store, route);
});
afterAll(() => dispose());

interface Records {
  contacts: { email: string; status: string; last_event_id: string; last_event_at: string }[];
  suppressions: { address: string; reason: string; event_id: string; at: string }[];
}

async function recordsOf(source: string): Promise<Records> {
  const s = store.schema;
  const contacts = await store.pool.query(
    `SELECT email, status, last_event_id, last_event_at FROM ${s}.contact_status WHERE source = $1 ORDER BY email`,
    [source],
  );
  const suppressions = await store.pool.query(
    `SELECT address, reason, event_id, at FROM ${s}.suppressions WHERE source = $1 ORDER BY address, reason`,
    [source],
  );
  return {
    contacts: contacts.rows.map((r) => ({ ...r, last_event_at: r.last_event_at.toISOString() })),
    suppressions: suppressions.rows.map((r) => ({ ...r, at: r.at.toISOString() })),
  };
}

async function applyInOrder(source: string, batches: readonly (readonly ServiceEvent[])[]): Promise<void> {
  for (const [i, events] of batches.entries()) {
    // The feed and the receiver take the same path: both are used.
    const result = await applier.apply({
      source,
      receivedVia: i % 2 === 0 ? 'webhook' : 'feed',
      events,
      quarantine: [],
    });
    expect(result.status).toBe('applied');
  }
}

const byTimeThenId = (a: ServiceEvent, b: ServiceEvent) =>
  Date.parse(a.created_at) - Date.parse(b.created_at) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
/** docs/DATA.md's keys, for the spellings the property test makes: one string may name two mailboxes. */
const FORMS: Readonly<Record<string, string[]>> = {
  'Al <A@example.com>': ['a@example.com'],
  'a@EXAMPLE.com.': ['a@example.com'],
  'a@\uff45xample\u3002com': ['a@example.com'],
  'a@example.com, B@example.com': ['a@example.com', 'b@example.com'],
};
const keys = (value: unknown): string[] =>
  typeof value !== 'string' || value.trim() === ''
    ? []
    : (FORMS[value] ?? [value.replace(/\s/g, '').toLowerCase()]);
const iso = (e: ServiceEvent) => new Date(e.created_at).toISOString();

/** docs/DATA.md's rules, written plainly over the whole set of events, as the oracle. */
function expectedRecords(events: readonly ServiceEvent[]): Records {
  const latest = new Map<string, ServiceEvent>();
  const contactEvents = events.filter(
    (e) => e.type === 'contact.subscribed' || e.type === 'contact.unsubscribed',
  );
  for (const e of [...contactEvents].sort(byTimeThenId)) {
    for (const email of keys(e.data.email)) latest.set(email, e);
  }
  const hard = new Map<string, { address: string; e: ServiceEvent }>();
  // One row per address and reason: the earliest event of the reason stands.
  const hardEvents = events
    .filter((e) => e.type === 'email.bounced' || e.type === 'email.complained')
    .sort(byTimeThenId);
  for (const e of hardEvents) {
    const to = e.data.to;
    const list = typeof to === 'string' ? [to] : Array.isArray(to) ? to : [];
    for (const address of list.flatMap(keys)) {
      if (!hard.has(`${address} ${e.type}`)) hard.set(`${address} ${e.type}`, { address, e });
    }
  }
  const suppressions: Records['suppressions'] = [...hard.values()].map(({ address, e }) => ({
    address,
    reason: e.type.slice('email.'.length),
    event_id: e.id,
    at: iso(e),
  }));
  for (const [email, e] of latest) {
    if (e.type === 'contact.unsubscribed') {
      suppressions.push({ address: email, reason: 'unsubscribed', event_id: e.id, at: iso(e) });
    }
  }
  const byKey =
    <T>(k: (t: T) => string) =>
    (a: T, b: T) =>
      k(a) < k(b) ? -1 : k(a) > k(b) ? 1 : 0;
  return {
    contacts: [...latest]
      .map(([email, e]) => ({
        email,
        status: e.type.slice('contact.'.length),
        last_event_id: e.id,
        last_event_at: iso(e),
      }))
      .sort(byKey((c) => c.email)),
    suppressions: suppressions.sort(byKey((s) => `${s.address} ${s.reason}`)),
  };
}

const at = (second: number) => `2024-06-01T00:00:0${second}.000Z`;
const contact = (
  id: string,
  kind: 'subscribed' | 'unsubscribed',
  second: number,
  email: unknown = 'a@example.com',
) => event(id, `contact.${kind}`, at(second), { email });
const mail = (id: string, kind: string, second: number, to: unknown = ['a@example.com']) =>
  event(id, `email.${kind}`, at(second), { email_id: `m-${id}`, to });

describe('contact_status and suppressions', () => {
  it('are the same whatever the order and the batching of the events', async () => {
    // Spellings of two addresses (case, white space, a name, a folded domain, both in
    // one string) and values that key nothing.
    const address = fc.constantFrom<unknown>(
      'a@example.com',
      ' A@Example.COM ',
      'b@example.com',
      'B@EXAMPLE.com\t',
      ...Object.keys(FORMS),
      '   ',
      7,
      undefined,
    );
    const eventSpec = fc.record({
      type: fc.constantFrom(
        'contact.subscribed',
        'contact.unsubscribed',
        'contact.subscribed',
        'contact.unsubscribed',
        'email.bounced',
        'email.complained',
        'email.delivered',
        'webhook.test',
      ),
      // Few distinct instants, so that ties on created_at are common.
      second: fc.integer({ min: 0, max: 3 }),
      email: address,
      to: fc.oneof(fc.array(address, { maxLength: 3 }), address),
    });
    const scenario = arrivals(
      eventSpec,
      (id, s, i) =>
        event(
          id,
          s.type,
          at(s.second),
          s.type.startsWith('contact.')
            ? s.email === undefined
              ? {}
              : { email: s.email }
            : { email_id: `m${i % 3}`, to: s.to },
        ),
      10,
    );

    let run = 0;
    await fc.assert(
      fc.asyncProperty(scenario, async ({ events, batches }) => {
        run += 1;
        await applyInOrder(`shuffled-${run}`, batches);
        await applyInOrder(`one-batch-${run}`, [events]);
        await applyInOrder(
          `sorted-${run}`,
          [...events].sort(byTimeThenId).map((e) => [e]),
        );
        const got = await recordsOf(`shuffled-${run}`);
        expect(got).toEqual(expectedRecords(events));
        expect(await recordsOf(`one-batch-${run}`)).toEqual(got);
        expect(await recordsOf(`sorted-${run}`)).toEqual(got);
      }),
      { numRuns: 100 },
    );
  }, 180_000);

  it('a subscribe that arrives before an older unsubscribe still wins by created_at', async () => {
    await applyInOrder('late-unsub', [[contact('s2', 'subscribed', 2)], [contact('u1', 'unsubscribed', 1)]]);
    expect(await recordsOf('late-unsub')).toEqual({
      contacts: [{ email: 'a@example.com', status: 'subscribed', last_event_id: 's2', last_event_at: at(2) }],
      suppressions: [],
    });
    // A tie on created_at goes to the greater id, whichever arrives first.
    await applyInOrder('tie', [[contact('b', 'unsubscribed', 1)], [contact('a', 'subscribed', 1)]]);
    await applyInOrder('tie', [[contact('a', 'subscribed', 1)]]);
    expect(await recordsOf('tie')).toMatchObject({
      contacts: [{ status: 'unsubscribed', last_event_id: 'b' }],
      suppressions: [{ address: 'a@example.com', reason: 'unsubscribed', event_id: 'b' }],
    });
  });

  it('a later subscribe lifts an unsubscribe, never a bounce or a complaint', async () => {
    await applyInOrder('lift', [
      [contact('u1', 'unsubscribed', 1, 'Un@Example.com')],
      [contact('u2', 'unsubscribed', 2, 'b@example.com'), mail('b3', 'bounced', 3, ['B@example.com '])],
    ]);
    expect((await recordsOf('lift')).suppressions).toEqual([
      { address: 'b@example.com', reason: 'bounced', event_id: 'b3', at: at(3) },
      { address: 'b@example.com', reason: 'unsubscribed', event_id: 'u2', at: at(2) },
      { address: 'un@example.com', reason: 'unsubscribed', event_id: 'u1', at: at(1) },
    ]);
    await applyInOrder('lift', [
      [contact('s4', 'subscribed', 4, 'un@example.com'), contact('s5', 'subscribed', 5, 'b@example.com')],
    ]);
    const records = await recordsOf('lift');
    expect(records.suppressions).toEqual([
      { address: 'b@example.com', reason: 'bounced', event_id: 'b3', at: at(3) },
    ]);
    expect(records.contacts.map((c) => c.status)).toEqual(['subscribed', 'subscribed']);
  });

  it('every reason an address has stands on its own row; between equals the earliest stands', async () => {
    await applyInOrder('rank', [
      [mail('b2', 'bounced', 2)],
      [contact('u0', 'unsubscribed', 0)],
      [mail('c3', 'complained', 3), mail('b1', 'bounced', 1)],
      [mail('c1', 'complained', 1)],
    ]);
    expect((await recordsOf('rank')).suppressions).toEqual([
      { address: 'a@example.com', reason: 'bounced', event_id: 'b1', at: at(1) },
      { address: 'a@example.com', reason: 'complained', event_id: 'c1', at: at(1) },
      { address: 'a@example.com', reason: 'unsubscribed', event_id: 'u0', at: at(0) },
    ]);
  });

  it('a contact event dated beyond now plus the skew never outranks one that really happened', async () => {
    const now = Date.now();
    const dated = (ms: number) => new Date(ms).toISOString();
    // A subscribe dated 2099, then a real unsubscribe: the unsubscribe counts.
    await applyInOrder('future-sub', [
      [event('f1', 'contact.subscribed', '2099-01-01T00:00:00.000Z', { email: 'ivan@example.com' })],
      [event('r1', 'contact.unsubscribed', dated(now - 1000), { email: 'ivan@example.com' })],
    ]);
    expect((await recordsOf('future-sub')).suppressions).toMatchObject([
      { address: 'ivan@example.com', reason: 'unsubscribed', event_id: 'r1' },
    ]);
    // The same in one batch, and with the future subscribe first and no other event.
    await applyInOrder('future-sub-one', [
      [
        event('f1', 'contact.subscribed', '2099-01-01T00:00:00.000Z', { email: 'ivan@example.com' }),
        event('r1', 'contact.unsubscribed', dated(now - 1000), { email: 'ivan@example.com' }),
      ],
    ]);
    expect((await recordsOf('future-sub-one')).contacts).toMatchObject([{ status: 'unsubscribed' }]);
    // An unsubscribe dated 2099 counts, ranked at its arrival: a subscribe that really
    // happens later (here: the unsubscribe's rank moved a day back) lifts it.
    await applyInOrder('future-unsub', [
      [event('f2', 'contact.unsubscribed', '2099-01-01T00:00:00.000Z', { email: 'jo@example.com' })],
    ]);
    expect((await recordsOf('future-unsub')).suppressions).toMatchObject([{ reason: 'unsubscribed' }]);
    await store.pool.query(
      `UPDATE ${store.schema}.contact_status SET ranked_at = ranked_at - interval '1 day' WHERE source = 'future-unsub'`,
    );
    await applyInOrder('future-unsub', [
      [event('s2', 'contact.subscribed', dated(now - 1000), { email: 'jo@example.com' })],
    ]);
    expect(await recordsOf('future-unsub')).toMatchObject({
      contacts: [{ status: 'subscribed', last_event_id: 's2' }],
      suppressions: [],
    });
  });

  it('an unsubscribe that arrives after a subscribe dated ahead within the skew is never outranked by it', async () => {
    const now = Date.now();
    const dated = (ms: number) => new Date(ms).toISOString();
    const minute = 60_000;
    const sub = (id: string, ms: number) =>
      event(id, 'contact.subscribed', dated(ms), { email: 'ida@example.com' });
    const unsub = (id: string, ms: number) =>
      event(id, 'contact.unsubscribed', dated(ms), { email: 'ida@example.com' });
    // A subscribe dated now + 4 min, then the unsubscribe that really came after it, dated now + 1 min.
    await applyInOrder('skew-ahead', [[sub('s4', now + 4 * minute)], [unsub('u1', now + minute)]]);
    expect(await recordsOf('skew-ahead')).toMatchObject({
      contacts: [{ status: 'unsubscribed', last_event_id: 'u1' }],
      suppressions: [{ address: 'ida@example.com', reason: 'unsubscribed', event_id: 'u1' }],
    });
    // Whatever the unsubscribe's own date, since the subscribe's is no evidence: here a minute ago.
    await applyInOrder('skew-past', [[sub('s4', now + 4 * minute)], [unsub('u0', now - minute)]]);
    expect((await recordsOf('skew-past')).suppressions).toMatchObject([
      { reason: 'unsubscribed', event_id: 'u0' },
    ]);
    // Both in one batch, the unsubscribe dated ahead too or not: the subscribe does not count.
    await applyInOrder('skew-one', [[sub('s4', now + 4 * minute), unsub('u1', now + minute)]]);
    expect((await recordsOf('skew-one')).suppressions).toMatchObject([
      { reason: 'unsubscribed', event_id: 'u1' },
    ]);
    await applyInOrder('skew-one-past', [[sub('s4', now + 4 * minute), unsub('u0', now - minute)]]);
    expect((await recordsOf('skew-one-past')).suppressions).toMatchObject([
      { reason: 'unsubscribed', event_id: 'u0' },
    ]);
    // A subscribe that arrives later still lifts it: it ranks at its own arrival.
    await applyInOrder('skew-ahead', [[sub('s9', now + 2 * minute)]]);
    expect(await recordsOf('skew-ahead')).toMatchObject({
      contacts: [{ status: 'subscribed', last_event_id: 's9' }],
      suppressions: [],
    });
  });

  it('keys an address with Unicode white space, format characters or another normal form as its plain form', async () => {
    await applyInOrder('unicode', [
      [
        mail('e1', 'bounced', 1, ['erin@example.com\u00a0']),
        mail('f1', 'bounced', 1, ['\u200bfrank@example.com\u200b']),
        mail('g1', 'bounced', 1, ['gre\u0301g@example.com']),
        contact('h1', 'unsubscribed', 1, '\ufeffHank@Example.com\u2003'),
      ],
    ]);
    expect((await recordsOf('unicode')).suppressions.map((s) => s.address)).toEqual([
      'erin@example.com',
      'frank@example.com',
      'gr\u00e9g@example.com',
      'hank@example.com',
    ]);
  });

  it('a contact event without data.email is stored and enqueued, projects nothing, and is counted', async () => {
    const result = await applier.apply({
      source: 'no-email',
      receivedVia: 'feed',
      events: [
        event('n1', 'contact.unsubscribed', at(1), {}),
        contact('n2', 'unsubscribed', 1, 42),
        contact('n3', 'unsubscribed', 1, '  '),
        contact('n4', 'unsubscribed', 1, `${'x'.repeat(400)}@example.com`),
        contact('ok', 'unsubscribed', 1, 'ok@example.com'),
      ],
      quarantine: [],
    });
    expect(result.inserted).toHaveLength(5);
    expect(result.outboxRows).toBe(5);
    expect(result.contactsWithoutEmail).toBe(4);
    expect((await recordsOf('no-email')).contacts.map((c) => c.email)).toEqual(['ok@example.com']);
    // Counted where an operator sees it: the metric and the once run's summary.
    const metrics = createMetrics(
      {
        cursorLagSeconds: async () => new Map(),
        outboxBacklog: async () => 0,
        lastSuccessSeconds: async () => new Map(),
        sourcesOverdue: async () => 0,
        fleetStates: async () => ({
          counts: { sources: 1, failing: 0, lagging: 0, neverSucceeded: 0 },
          worst: [],
        }),
      },
      ['no-email'],
    );
    metrics.hooksFor('no-email').onCommit({ pages: 1, result });
    expect(await metrics.registry.metrics()).toMatch(/^feedsync_contact_events_without_email_total 4$/m);
    expect((await metrics.summary()).contact_events_without_email).toBe(4);
  });

  it('a recipient address too long to key is stored but suppresses nothing, and the event is kept', async () => {
    const long = `${'y'.repeat(3000)}@example.com`;
    const result = await applier.apply({
      source: 'long-to',
      receivedVia: 'webhook',
      events: [mail('l1', 'bounced', 1, [long, 'fine@example.com'])],
      quarantine: [],
    });
    expect(result.inserted).toHaveLength(1);
    expect(result.unstorable).toEqual([]);
    expect((await recordsOf('long-to')).suppressions.map((s) => s.address)).toEqual(['fine@example.com']);
  });

  it('are written on the slow path too, beside an event Postgres refuses', async () => {
    const { store: own, dispose: drop } = await migratedStore('client_records_refused');
    try {
      await addRefusingTrigger(own.pool, own.schema);
      const refusing = createApplier(own, route);
      const result = await refusing.apply({
        source: 'slow',
        receivedVia: 'feed',
        events: [
          contact('u1', 'unsubscribed', 1, 'u@example.com'),
          event('bad', 'email.bounced', at(1), { to: ['bad@example.com'], refuse: '22007' }),
          mail('b1', 'bounced', 2, ['b@example.com']),
        ],
        quarantine: [],
      });
      expect(result.unstorable.map((u) => u.id)).toEqual(['bad']);
      const { rows } = await own.pool.query(
        `SELECT address, reason FROM ${own.schema}.suppressions ORDER BY address`,
      );
      expect(rows).toEqual([
        { address: 'b@example.com', reason: 'bounced' },
        { address: 'u@example.com', reason: 'unsubscribed' },
      ]);
    } finally {
      await drop();
    }
  });
});
