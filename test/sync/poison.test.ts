import { Queue } from 'bullmq';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ServiceEvent } from '../../src/api/types.js';
import { MAX_DATA_DEPTH } from '../../src/feed/envelope.js';
import { jsonText } from '../../src/feed/json-text.js';
import { createLogger } from '../../src/logger.js';
import { jobIdFor } from '../../src/queue/routes.js';
import { addRefusingTrigger, nested, quarantinedRaw, wide } from '../support/poison-items.js';
import { seeded } from '../support/random.js';
import { TEST_REDIS_URL } from '../support/redis.js';
import { CONTACT_QUEUE, expectExactlyOnce, type Sandbox, useSandboxes } from './harness.js';
import { account, ledgerOf, syncItems } from './poison-support.js';

const sandbox = useSandboxes();
const logger = createLogger({ level: 'silent' });
let box: Sandbox;
beforeAll(async () => {
  box = await sandbox('poison');
});

/** 25 good email events around the poison, so that it sits mid-batch (pages of 10, one commit). */
function around(source: string, poison: unknown[]): unknown[] {
  const good = (n: number): ServiceEvent => ({
    id: `${source}_${String(n).padStart(3, '0')}`,
    type: 'email.delivered',
    created_at: new Date(Date.UTC(2024, 4, 1, 0, 0, n)).toISOString(),
    data: { email_id: `em_${n}`, to: ['someone@example.com'] },
  });
  return [
    ...Array.from({ length: 12 }, (_, i) => good(i)),
    ...poison,
    ...Array.from({ length: 13 }, (_, i) => good(100 + i)),
  ];
}

const idOf = (item: unknown): string => (item as { id: string }).id;

/** Runs the items through the feed and checks the common claim: all accounted for, cursor at the end. */
async function syncPoison(source: string, poison: unknown[], env: Record<string, string> = {}) {
  const items = around(source, poison);
  const result = await syncItems(box, logger, items, source, env);
  expect(result).toMatchObject({ status: 'caught-up', drained: true });
  const ledger = await ledgerOf(box, source);
  expect(account(items, ledger)).toMatchObject({ checked: items.length, lost: 0, duplicated: 0 });
  expect(ledger.cursor, 'the cursor went past the poison, to the last event').toBe(idOf(items.at(-1)));
  await expectExactlyOnce({ store: box.store, prefix: box.prefix, expected: ledger.stored.size, source });
  return { items, result, ledger };
}

describe('poison events on the feed: each is stored or quarantined, the rest of its batch commits', () => {
  it('created_at that Postgres would refuse as written is stored as its UTC instant, or quarantined', async () => {
    const at = (id: string, createdAt: string): ServiceEvent => ({
      id,
      type: 'contact.subscribed',
      created_at: createdAt,
      data: {},
    });
    const kept: [ServiceEvent, string][] = [
      [at('ts_plus16', '2024-05-01T10:00:00+16:00'), '2024-04-30T18:00:00.000Z'],
      [at('ts_plus2359', '2024-05-01T10:00:00-23:59'), '2024-05-02T09:59:00.000Z'],
      [at('ts_fraction', `2024-05-01T10:00:00.123456${'7'.repeat(300)}Z`), '2024-05-01T10:00:00.123Z'],
      [at('ts_leap', '2016-12-31T23:59:60Z'), '2017-01-01T00:00:00.000Z'],
      [at('ts_lower', '2024-05-01t10:00:00z'), '2024-05-01T10:00:00.000Z'],
    ];
    const refused = [
      at('ts_minutes', '2024-05-01T10:00:00+01:60'),
      at('ts_offset24', '2024-05-01T10:00:00+24:00'),
      at('ts_hour24', '2024-05-01T24:00:00Z'),
    ];
    const { ledger } = await syncPoison('ts', [...kept.map(([e]) => e), ...refused]);
    const { rows } = await box.store.pool.query<{ id: string; created_at: Date }>(
      `SELECT id, created_at FROM "${box.schema}".events WHERE source = 'ts' AND id LIKE 'ts\\_%'`,
    );
    const byId = new Map(rows.map((r) => [r.id, r]));
    const queue = new Queue(CONTACT_QUEUE, { connection: { url: TEST_REDIS_URL }, prefix: box.prefix });
    try {
      for (const [event, instant] of kept) {
        expect(byId.get(event.id)?.created_at.toISOString(), event.created_at.slice(0, 40)).toBe(instant);
        // The job carries the instant in one form, whatever the service wrote: milliseconds,
        // or microseconds when it has them (Postgres keeps six digits, Date three).
        const text = event.id === 'ts_fraction' ? '2024-05-01T10:00:00.123456Z' : instant;
        expect((await queue.getJob(jobIdFor('ts', event.id)))?.data.created_at).toBe(text);
      }
    } finally {
      await queue.close();
    }
    for (const event of refused) expect(ledger.quarantine.get(jsonText(event))).toBe('bad created_at');
  });

  it('an email_id past the index row limit goes to quarantine with its reason', async () => {
    const long: ServiceEvent = {
      id: 'eid_long',
      type: 'email.bounced',
      created_at: '2024-05-01T10:00:00Z',
      data: { email_id: `em_${'x'.repeat(3_000)}`, to: ['a@example.com'] },
    };
    const { ledger } = await syncPoison('eid', [long]);
    expect(ledger.quarantine.get(jsonText(long))).toBe('data.email_id longer than 500 characters');
    const { rows } = await box.store.pool.query(
      `SELECT count(*)::int AS n FROM "${box.schema}".email_status WHERE source = 'eid'`,
    );
    expect(rows[0].n).toBe(25);
  });

  it('data nested 5,000 deep goes to quarantine, raw and whole; the deepest allowed is stored and enqueued', async () => {
    const deep: ServiceEvent = {
      id: 'deep_5000',
      type: 'email.sent',
      created_at: '2024-05-01T10:00:00Z',
      data: { email_id: 'em_deep', x: nested(5_000) },
    };
    const allowed: ServiceEvent = {
      id: 'deep_ok',
      type: 'email.sent',
      created_at: '2024-05-01T10:00:00Z',
      data: nested(MAX_DATA_DEPTH),
    };
    const { ledger } = await syncPoison('deep', [deep, allowed]);
    expect(ledger.quarantine.get(jsonText(deep))).toBe(`data nested deeper than ${MAX_DATA_DEPTH} levels`);
    expect(ledger.stored.has('deep_ok')).toBe(true);
  });

  it('the longest keys the checks let through fit their indexes, in the widest characters', async () => {
    // 200 characters of source, 500 of id and of email_id, three bytes each: under the btree limit of 2704.
    const random = seeded(7);
    const source = wide(random, 200);
    const widest: ServiceEvent = {
      id: wide(random, 500),
      type: 'email.delivered',
      created_at: '2024-05-01T10:00:00Z',
      data: { email_id: wide(random, 500), to: [] },
    };
    const { ledger } = await syncPoison(source, [widest]);
    expect(ledger.stored.has(widest.id)).toBe(true);
  });
});

describe('the safety net under the checks', () => {
  it('quarantines whatever Postgres refuses as data (class 22, 23, 54); a retryable error still fails the run', async () => {
    const trap = await sandbox('poison_trap');
    await addRefusingTrigger(trap.store.pool, trap.schema);
    const refusing = (code: string): ServiceEvent => ({
      id: `refuse_${code}`,
      type: 'contact.unsubscribed',
      created_at: '2024-05-01T10:00:00Z',
      data: { refuse: code },
    });
    const poison = ['22023', '22P02', '23514', '54001'].map(refusing);
    const items = around('trap', poison);
    const result = await syncItems(trap, logger, items, 'trap');
    expect(result).toMatchObject({ status: 'caught-up', drained: true, quarantined: 4 });
    const ledger = await ledgerOf(trap, 'trap');
    expect(account(items, ledger)).toMatchObject({
      checked: 29,
      stored: 25,
      quarantined: 4,
      lost: 0,
      duplicated: 0,
    });
    for (const e of poison) {
      expect(ledger.quarantine.get(quarantinedRaw(e))).toContain(`SQLSTATE ${e.data.refuse}`);
    }
    expect(ledger.cursor).toBe(idOf(items.at(-1)));
    await expectExactlyOnce({ store: trap.store, prefix: trap.prefix, expected: 25, source: 'trap' });

    // 40001 (serialization failure) and 57014 (cancel) can pass on a retry: the run fails, nothing moves.
    for (const code of ['40001', '57014']) {
      const again = around(`retry${code}`, [refusing(code)]);
      const failure = await syncItems(trap, logger, again, `retry${code}`).catch((err: unknown) => err);
      expect(failure).toMatchObject({ code });
      expect(await ledgerOf(trap, `retry${code}`)).toMatchObject({ cursor: null, quarantineRows: 0 });
    }
  });
});
