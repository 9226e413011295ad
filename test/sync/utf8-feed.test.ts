import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSync } from '../../src/sync/sync.js';
import { testConfig } from '../support/config.js';
import { type FeedServer, startFeedServer } from './feed-server.js';
import { captureLogger, cursorOf, type Sandbox, useSandboxes } from './harness.js';

// A feed whose bytes are not UTF-8 is never decoded lossily: the items holding such bytes
// are quarantined raw, the others stored, and no id or address is stored altered.

/** `text` in UTF-8, with `byte` where each '#' stands. */
const withByte = (text: string, byte: number): Buffer =>
  Buffer.concat(
    text
      .split('#')
      .flatMap((part, i) => (i === 0 ? [Buffer.from(part)] : [Buffer.from([byte]), Buffer.from(part)])),
  );
/** A bounce whose id and address hold `byte`. */
const bounce = (byte: number): Buffer =>
  withByte(
    '{"id":"inv-#","type":"email.bounced","created_at":"2024-05-01T00:00:01Z",' +
      `"data":{"email_id":"em_${byte}","to":["inv-#@example.com"]}}`,
    byte,
  );
const good = Buffer.from(
  '{"id":"ok_1","type":"email.bounced","created_at":"2024-05-01T00:00:02Z","data":{"email_id":"em_ok","to":["caf\u00e9@example.com"]}}',
);
const page = (items: Buffer[], nextAfter: Buffer): Buffer =>
  Buffer.concat([
    Buffer.from('{"data":['),
    ...items.flatMap((item, i) => (i === 0 ? [item] : [Buffer.from(','), item])),
    Buffer.from('],"next_after":"'),
    nextAfter,
    Buffer.from('"}'),
  ]);

/** What the feed serves first; after any cursor, an empty page. */
let first: Buffer;
let feed: FeedServer;
let box: Sandbox;
const sandbox = useSandboxes();
const logs = captureLogger();

beforeAll(async () => {
  feed = await startFeedServer([], { rawPage: (after) => (after === null ? first : undefined) });
  box = await sandbox('utf8_feed');
});
afterAll(() => feed.close());

function syncOf(source: string) {
  const config = testConfig(
    { schema: box.schema, prefix: box.prefix, baseUrl: feed.baseUrl },
    { FEED_SOURCE: source, FEED_MAX_RETRIES: '3' },
  );
  return createSync(config, { logger: logs.logger, store: box.store, retryDeps: { sleep: async () => {} } });
}

describe('a feed page that is not UTF-8', () => {
  it('quarantines each item holding such bytes raw (\\xNN), stores the rest, and moves the cursor past them', async () => {
    first = page([bounce(0xff), bounce(0xfe), good], Buffer.from('ok_1'));
    const sync = syncOf('bytes');
    try {
      expect(await sync.runOnce()).toMatchObject({ stored: 1, quarantined: 2 });
    } finally {
      await sync.close();
    }
    const s = `"${box.schema}"`;
    const { rows: events } = await box.store.pool.query(
      `SELECT id, data->'to' AS "to" FROM ${s}.events WHERE source = 'bytes'`,
    );
    expect(events).toEqual([{ id: 'ok_1', to: ['caf\u00e9@example.com'] }]);
    const { rows: quarantined } = await box.store.pool.query<{ raw: string; reason: string }>(
      `SELECT raw, reason FROM ${s}.quarantine WHERE source = 'bytes' ORDER BY raw`,
    );
    // Two rows, not one: the bytes are told apart, as the service sent them.
    expect(quarantined.map((q) => q.raw)).toEqual([
      '{"id":"inv-\\xFE","type":"email.bounced","created_at":"2024-05-01T00:00:01Z","data":{"email_id":"em_254","to":["inv-\\xFE@example.com"]}}',
      '{"id":"inv-\\xFF","type":"email.bounced","created_at":"2024-05-01T00:00:01Z","data":{"email_id":"em_255","to":["inv-\\xFF@example.com"]}}',
    ]);
    for (const q of quarantined) expect(q.reason).toMatch(/^bytes in it are not UTF-8/);
    const { rows: suppressed } = await box.store.pool.query(
      `SELECT address FROM ${s}.suppressions WHERE source = 'bytes'`,
    );
    expect(suppressed).toEqual([{ address: 'caf\u00e9@example.com' }]);
    expect(await cursorOf(box.store, 'bytes')).toBe('ok_1');
  });

  it('fails the page, cursor unmoved, when next_after holds such bytes: it cannot be sent back as it came', async () => {
    first = page([good], withByte('ok#', 0xff));
    const sync = syncOf('bad-next');
    try {
      await expect(sync.runOnce()).rejects.toMatchObject({ code: 'BAD_NEXT_AFTER' });
    } finally {
      await sync.close();
    }
    expect(await cursorOf(box.store, 'bad-next')).toBeNull();
  });
});
