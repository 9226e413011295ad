import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/metrics/metrics.js';
import { createSync } from '../../src/sync/sync.js';
import { testConfig } from '../support/config.js';
import { captureLogger, cursorOf, type Sandbox, useSandboxes } from './harness.js';

// What the feed sends is kept exactly or refused: a number JSON.parse would change is
// never stored changed, and a status no HTTP server sends is a protocol error.

const event = (n: number, data: string) =>
  `{"id":"ev_${n}","type":"email.delivered","created_at":"2024-05-01T00:00:0${n}Z","data":${data}}`;
const ITEMS = [
  event(1, '{"email_id":"em_1","n":12345678901234567891}'),
  event(2, '{"email_id":"em_2","x":1e400}'),
  event(3, '{"email_id":"em_3","deep":{"list":[1,2,9007199254740993]}}'),
  event(4, '{"email_id":"em_4","n":1.5,"big":123456789012345,"tiny":1e-7,"s":"12345678901234567891"}'),
  event(5, '{"email_id":"em_5","n":12345678901234567000}'),
  event(6, '{"email_id":"em_6","small":1e-400}'),
];
const PAGE = `{"data":[${ITEMS.join(',\n ')}],"next_after":"ev_6"}`;

/** The status the feed answers next; 200 serves PAGE, then an empty page. */
let status = 200;
let requests = 0;
let server: Server;
let baseUrl: string;
let box: Sandbox;
const sandbox = useSandboxes();
const logs = captureLogger();

beforeAll(async () => {
  server = createServer((req, res) => {
    requests++;
    const after = new URL(req.url ?? '/', 'http://feed').searchParams.get('after');
    if (status !== 200) res.writeHead(status, { 'content-type': 'application/json' }).end('{}');
    else if (after === null) res.writeHead(200, { 'content-type': 'application/json' }).end(PAGE);
    else
      res.writeHead(200, { 'content-type': 'application/json' }).end(`{"data":[],"next_after":"${after}"}`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api`;
  box = await sandbox('exact_feed');
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

function syncOf(source: string, metrics = createMetrics(noGauges, [source])) {
  const config = testConfig(
    { schema: box.schema, prefix: box.prefix, baseUrl },
    { FEED_SOURCE: source, FEED_MAX_RETRIES: '3' },
  );
  const hooks = metrics.hooksFor(source);
  return {
    metrics,
    sync: createSync(config, {
      logger: logs.logger,
      store: box.store,
      hooks: { onFeedResponse: hooks.onFeedResponse },
      retryDeps: { sleep: async () => {} },
    }),
  };
}

const noGauges = {
  cursorLagSeconds: async () => new Map<string, number>(),
  outboxBacklog: async () => 0,
  lastSuccessSeconds: async () => new Map<string, number>(),
  fleetStates: async () => ({ counts: { sources: 1, failing: 0, lagging: 0, neverSucceeded: 0 }, worst: [] }),
  sourcesOverdue: async () => 0,
};

describe('numbers beyond what a double keeps', () => {
  it('an event holding one is quarantined with its raw text; the others are stored with their numbers exactly', async () => {
    status = 200;
    const { sync } = syncOf('numbers');
    try {
      const result = await sync.runOnce();
      expect(result).toMatchObject({ stored: 2, quarantined: 4 });
    } finally {
      await sync.close();
    }
    const s = `"${box.schema}"`;
    const stored = await box.store.pool.query<{ id: string; data: string }>(
      `SELECT id, data::text AS data FROM ${s}.events WHERE source = 'numbers' ORDER BY id`,
    );
    expect(stored.rows.map((r) => r.id)).toEqual(['ev_4', 'ev_5']);
    // jsonb keeps the decimal it is given: each is the number the feed sent.
    const [four, five] = stored.rows.map((r) => r.data);
    expect(four).toContain('"big": 123456789012345');
    expect(four).toContain('"s": "12345678901234567891"');
    expect(five).toContain('"n": 12345678901234567000');
    const quarantined = await box.store.pool.query<{ raw: string; reason: string }>(
      `SELECT raw, reason FROM ${s}.quarantine WHERE source = 'numbers' ORDER BY raw`,
    );
    expect(quarantined.rows.map((r) => r.raw)).toEqual([ITEMS[0], ITEMS[1], ITEMS[2], ITEMS[5]]);
    for (const row of quarantined.rows) expect(row.reason).toMatch(/cannot be kept exactly/);
    expect(await cursorOf(box.store, 'numbers')).toBe('ev_6');
  });
});

describe('the feed status', () => {
  it('a status outside 100–599 is a protocol error: BAD_STATUS, not retried', async () => {
    for (const answer of [600, 799, 999]) {
      status = answer;
      requests = 0;
      const { sync } = syncOf(`status_${answer}`);
      try {
        await expect(sync.runOnce()).rejects.toMatchObject({ code: 'BAD_STATUS', status: answer });
      } finally {
        await sync.close();
      }
      expect(requests).toBe(1);
    }
  });

  it('is labelled by class: every status from 0 to 999 makes ten series', async () => {
    const metrics = createMetrics(noGauges, ['classes']);
    const hooks = metrics.hooksFor('classes');
    for (let answer = 0; answer < 1000; answer++) hooks.onFeedResponse({ status: answer, seconds: 0.01 });
    const text = await metrics.registry.metrics();
    const labels = new Set(
      [...text.matchAll(/^feedsync_feed_request_duration_seconds_count\{[^}]*status="([^"]+)"/gm)].map(
        (m) => m[1],
      ),
    );
    expect([...labels].sort()).toEqual(
      ['0', '1xx', '2xx', '3xx', '401', '403', '429', '4xx', '5xx', 'other'].sort(),
    );
  });
});
