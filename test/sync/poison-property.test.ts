import fc from 'fast-check';
import { beforeAll, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { addRefusingTrigger, nested } from '../support/poison-items.js';
import { expectExactlyOnce, type Sandbox, useSandboxes } from './harness.js';
import { account, ledgerOf, syncItems } from './poison-support.js';

const sandbox = useSandboxes();
const logger = createLogger({ level: 'silent' });
const PAGE = 10;
let box: Sandbox;

beforeAll(async () => {
  box = await sandbox('poison_prop');
  await addRefusingTrigger(box.store.pool, box.schema);
});

/** Text with the characters that trouble a store: NUL, lone surrogates, escapes, wide ones. */
const text = fc.string({
  unit: fc.oneof(
    fc.constantFrom('\u0000', '\ud800', '\udfff', '\\', '"', '\\u0000'),
    fc.constantFrom('a', 'é', '中', '😀', ' '),
  ),
  maxLength: 20,
});
const createdAt = fc.oneof(
  fc
    .date({
      min: new Date('0001-01-02T00:00:00Z'),
      max: new Date('9999-12-30T00:00:00Z'),
      noInvalidDate: true,
    })
    .map((d) => d.toISOString()),
  fc.constantFrom(
    '2024-05-01T10:00:00+16:00',
    '2024-05-01T10:00:00-23:59',
    '2024-05-01T10:00:00+01:60',
    `2024-05-01T10:00:00.${'1'.repeat(300)}Z`,
    '2016-12-31T23:59:60Z',
    '2024-05-01t10:00:00z',
    '2024-02-30T00:00:00Z',
    '0001-01-01T00:30:00+01:00',
    'yesterday',
  ),
);
const data = fc.record(
  {
    email_id: fc.oneof(
      text,
      fc.integer({ min: 0, max: 4_000 }).map((n) => `em_${'e'.repeat(n)}`),
    ),
    to: fc.array(fc.oneof(text, fc.jsonValue()), { maxLength: 3 }),
    json: fc.jsonValue({ stringUnit: 'binary' }),
    // A depth, made into nesting only when served: fast-check's report of a counterexample recurses.
    deep: fc.integer({ min: 1, max: 6_000 }),
    long: fc.integer({ min: 0, max: 20_000 }).map((n) => 'l'.repeat(n)),
    text,
    refuse: fc.constantFrom('22023', '22007', '23514', '54000', '54001'),
  },
  { requiredKeys: [] },
);
const event = fc.record(
  {
    type: fc.constantFrom(
      'email.sent',
      'email.delivered',
      'email.bounced',
      'email.failed',
      'email.complained',
      'contact.subscribed',
      'webhook.test',
      'email.opened',
    ),
    created_at: createdAt,
    data: fc.oneof({ weight: 9, arbitrary: data }, { weight: 1, arbitrary: fc.jsonValue() }),
  },
  { requiredKeys: ['type', 'created_at'] },
);
/** One served item: an event with a fresh id, a copy of an earlier one (same or other content), or anything. */
const item = fc.oneof(
  { weight: 8, arbitrary: event.map((e) => ({ kind: 'new' as const, e })) },
  { weight: 1, arbitrary: fc.tuple(fc.nat(), event).map(([of, e]) => ({ kind: 'again' as const, of, e })) },
  { weight: 1, arbitrary: fc.jsonValue().map((v) => ({ kind: 'raw' as const, v })) },
);

let runs = 0;

it('random JSON, deep nesting, long strings and refused values through the real feed: each event stored or quarantined once, the cursor at the end', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(item, { minLength: 1, maxLength: 40 }), async (drawn) => {
      const source = `prop${++runs}`;
      const items: unknown[] = [];
      const events: Record<string, unknown>[] = [];
      for (const d of drawn) {
        if (d.kind === 'raw') items.push(d.v);
        else if (d.kind === 'again' && events.length > 0) {
          const first = events[d.of % events.length]!;
          items.push(d.of % 2 === 0 ? first : { ...served(d.e), id: first.id });
        } else {
          const e = { id: `${source}_${items.length}`, ...served(d.e) };
          events.push(e);
          items.push(e);
        }
        // Every page ends with a plain event, so that next_after is always a fresh id.
        if (items.length % PAGE === PAGE - 1) items.push(filler(source, items.length));
      }
      items.push(filler(source, items.length));

      const result = await syncItems(box, logger, items, source);
      expect(result).toMatchObject({ status: 'caught-up', drained: true });
      const ledger = await ledgerOf(box, source);
      const accounted = account(items, ledger);
      expect(accounted).toMatchObject({ lost: 0, duplicated: 0 });
      expect(accounted.stored + accounted.quarantined).toBe(items.length);
      expect(ledger.cursor).toBe((items.at(-1) as { id: string }).id);
      await expectExactlyOnce({ store: box.store, prefix: box.prefix, expected: ledger.stored.size, source });
    }),
    { numRuns: 15, seed: 20_261_123, endOnFailure: true },
  );
}, 240_000);

/** The event as served: its drawn depth made into nesting. */
function served<E extends { data?: unknown }>(e: E): E {
  const data = e.data as { deep?: unknown } | undefined;
  return typeof data?.deep === 'number' ? { ...e, data: { ...data, deep: nested(data.deep) } } : e;
}

function filler(source: string, n: number) {
  return { id: `${source}_f${n}`, type: 'webhook.test', created_at: '2024-05-01T10:00:00Z', data: {} };
}
