import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate as tick } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../src/api/client.js';
import { type BodyRoom, createTransport } from '../../src/api/http.js';
import { createFeedClient } from '../../src/feed/feed-client.js';
import { type ApplyBatch, nothingApplied } from '../../src/store/applier.js';
import { ByteBudget } from '../../src/sync/byte-budget.js';
import { catchUp } from '../../src/sync/catch-up.js';
import { HELD_PAGES_DEFAULTS } from '../../src/sync/held-pages.js';
import { testEnv } from '../support/config.js';
import { killChildren, runCli } from '../support/processes.js';
import { startTestSimulator } from '../support/simulator.js';
import { useSandboxes } from './harness.js';

const sandbox = useSandboxes();
const dir = mkdtempSync(join(tmpdir(), 'feedsync-feed-budget-'));
afterAll(async () => {
  await killChildren();
  rmSync(dir, { recursive: true, force: true });
});

describe('ByteBudget: what a request takes is what its answer weighs', () => {
  it('lets the oldest request reading go on past the capacity, by at most one answer; the others wait', async () => {
    const budget = new ByteBudget(10);
    const older = budget.open();
    const younger = budget.open();
    // Both half-read, the budget spent: the younger waits, the older may not wait on it.
    await younger.take(6);
    await older.take(4);
    let youngerGotMore = false;
    const waiting = younger.take(3).then(() => {
      youngerGotMore = true;
    });
    await older.take(5);
    expect(budget.held).toBe(15);
    await tick();
    expect(youngerGotMore).toBe(false);
    // The older answer is read: its page keeps its bytes, and the younger is now the oldest reading.
    await older.read(9);
    await waiting;
    expect(budget.held).toBe(18);
    expect(budget.peak).toBeLessThanOrEqual(budget.capacity + 9);
    older.release();
    younger.release();
    expect(budget.held).toBe(0);
  });

  it('makes the oldest wait only while the others hold more than the capacity: pages whose commits give it back', async () => {
    const budget = new ByteBudget(10);
    const first = budget.open();
    await first.take(8);
    await first.read(8);
    const second = budget.open();
    await second.take(8); // the oldest reading: 8 held by the others, within the capacity
    await second.read(8);
    const third = budget.open();
    let read = false;
    const reading = third.take(8).then(() => {
      read = true;
    });
    await tick();
    expect(read).toBe(false); // the others hold 16, past the capacity
    first.release();
    await reading;
    expect(budget.held).toBe(16);
    expect(budget.peak).toBe(16);
    second.release();
    third.release();
  });

  it('gives back a failed attempt and keeps its place; a wait ends with its signal, taking nothing', async () => {
    const budget = new ByteBudget(10);
    const hold = budget.open();
    await hold.take(7);
    hold.giveBack();
    expect(budget.held).toBe(0);
    const other = budget.open();
    await hold.take(10);
    const stop = new AbortController();
    const waiting = other.take(4, stop.signal);
    expect(budget.wanted).toBe(true);
    stop.abort(new Error('stopped'));
    await expect(waiting).rejects.toThrow('stopped');
    expect(budget.wanted).toBe(false);
    expect(budget.held).toBe(10);
    hold.release();
    other.release();
    expect(budget.held).toBe(0);
  });
});

describe('the transport takes room for a body before reading it', () => {
  it('takes a Content-Length whole, each chunk of a body without one, and refuses a declared size past the limit unread', async () => {
    const body = JSON.stringify({ data: [], pad: 'x'.repeat(3_000) });
    const server = createServer((req, res) => {
      if (req.url?.includes('chunked')) {
        res.writeHead(200, { 'transfer-encoding': 'chunked' });
        res.write(body.slice(0, 1_000));
        res.end(body.slice(1_000));
        return;
      }
      res.writeHead(200, { 'content-length': Buffer.byteLength(body) }).end(body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api`;
    const takes: number[] = [];
    let givenBack = 0;
    const room: BodyRoom = {
      take: async (bytes) => {
        takes.push(bytes);
      },
      giveBack: () => {
        givenBack++;
      },
    };
    const roomy = createTransport({ baseUrl, apiKey: 'key', timeoutMs: 5_000, maxResponseBytes: 10_000 });
    const tight = createTransport({ baseUrl, apiKey: 'key', timeoutMs: 5_000, maxResponseBytes: 1_000 });
    try {
      const whole = await roomy.request({ method: 'GET', path: '/events', room });
      expect(takes).toEqual([whole.body.length]);
      takes.length = 0;
      const chunked = await roomy.request({ method: 'GET', path: '/events', query: { chunked: '1' }, room });
      expect(takes.reduce((a, b) => a + b, 0)).toBe(chunked.body.length);
      expect(givenBack).toBe(0);
      takes.length = 0;
      await expect(tight.request({ method: 'GET', path: '/events', room })).rejects.toMatchObject({
        code: 'RESPONSE_TOO_LARGE',
      });
      expect(takes).toEqual([]);
      expect(givenBack).toBe(1);
    } finally {
      await roomy.close();
      await tight.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

/**
 * A feed of `pages` pages of `limit` events padded to `eventBytes`, made on the fly; with
 * `chunked` the answers have no Content-Length (they are read as they arrive). Counts the
 * requests in flight at once.
 */
async function paddedFeed(opts: { pages: number; limit: number; eventBytes: number; chunked: boolean }) {
  const pad = 'x'.repeat(opts.eventBytes - 150);
  const id = (n: number) => `ev_${String(n).padStart(6, '0')}`;
  const inFlight = { now: 0, max: 0 };
  const server = createServer((req, res) => {
    inFlight.now++;
    inFlight.max = Math.max(inFlight.max, inFlight.now);
    res.on('close', () => inFlight.now--);
    const after = new URL(req.url ?? '/', 'http://feed').searchParams.get('after');
    const from = after === null ? 1 : Number(after.slice(3)) + 1;
    const to = Math.min(opts.pages * opts.limit, from + opts.limit - 1);
    const events: string[] = [];
    for (let n = from; n <= to; n++) {
      events.push(
        `{"id":"${id(n)}","type":"email.opened","created_at":"2024-05-01T00:00:00Z","data":{"email_id":"em_${n}","to":[],"pad":"${pad}"}}`,
      );
    }
    const body = `{"data":[${events.join(',')}],"next_after":${JSON.stringify(to >= from ? id(to) : after)}}`;
    if (!opts.chunked) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(body);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    for (let at = 0; at < body.length; at += 256 * 1024) res.write(body.slice(at, at + 256 * 1024));
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api`,
    inFlight,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('lanes of one process share one budget of the feed bytes', () => {
  it.each([false, true])(
    '4 lanes of pages near 8 MiB (chunked: %s) never hold more than the budget plus one answer',
    async (chunked) => {
      const { maxHeldBytes, maxPageBytes } = HELD_PAGES_DEFAULTS;
      const limit = 95;
      const pages = 4;
      const feed = await paddedFeed({ pages, limit, eventBytes: 86_000, chunked });
      const budget = new ByteBudget(maxHeldBytes);
      const clients: ServiceClient[] = [];
      try {
        const lane = async (n: number) => {
          const client = new ServiceClient({
            baseUrl: feed.baseUrl,
            apiKey: 'key',
            maxResponseBytes: maxPageBytes,
          });
          clients.push(client);
          const applied: string[] = [];
          const result = await catchUp({
            source: `s${n}`,
            start: null,
            signal: new AbortController().signal,
            isStored: async () => false,
            budget,
            fetchPage: createFeedClient({
              client,
              limit,
              listField: null,
              types: null,
              retry: { maxRetries: 0, maxRetryWaitMs: 0 },
            }),
            apply: async (batch: ApplyBatch) => {
              // A commit takes a while: the others read meanwhile, as far as the budget lets them.
              for (let i = 0; i < 20; i++) await tick();
              applied.push(...batch.events.map((e) => e.id));
              return { ...nothingApplied(), inserted: [...batch.events] };
            },
          });
          return { result, applied };
        };
        const lanes = await Promise.all([0, 1, 2, 3].map(lane));
        for (const { result, applied } of lanes) {
          expect(result).toMatchObject({ status: 'caught-up', stored: pages * limit });
          expect(applied).toHaveLength(pages * limit);
        }
        expect(budget.peak).toBeGreaterThan(maxPageBytes / 2);
        expect(budget.peak).toBeLessThanOrEqual(budget.capacity + maxPageBytes);
        expect(budget.held).toBe(0);
        expect(budget.wanted).toBe(false);
        // The requests were on their way side by side, not one at a time.
        expect(feed.inFlight.max).toBeGreaterThanOrEqual(2);
      } finally {
        for (const client of clients) await client.close();
        await feed.close();
      }
    },
    60_000,
  );
});

describe('far feeds overlap: the simulator counts the feed requests in flight at once', () => {
  it('10 lanes over 20 sources of small pages at +250 ms: at least 8 requests at once', async () => {
    // Real time in the simulator, so the added latency keeps each request open while the others start.
    const sim = await startTestSimulator({ timeScale: 1 });
    try {
      const box = await sandbox('feed_overlap');
      const keyEnv: Record<string, string> = {};
      const sources = Array.from({ length: 20 }, (_, i) => {
        const key = `sim_test_overlap${i}_${Math.random().toString(36).slice(2, 10)}`;
        sim.account(key).setBacklog(60);
        keyEnv[`OVERLAP_KEY_${i}`] = key;
        return { source: `far-${i}`, base_url: sim.baseUrl, api_key_env: `OVERLAP_KEY_${i}` };
      });
      const file = join(dir, 'far.json');
      writeFileSync(file, JSON.stringify({ sources }));
      sim.setFaults({ latencyMs: 250 });
      const env = testEnv(
        { schema: box.schema, prefix: box.prefix },
        {
          ...keyEnv,
          SYNC_CONCURRENCY: '10',
          FEED_PAGE_LIMIT: '20',
          FEED_SOURCES_FILE: file,
          LOG_LEVEL: 'info',
        },
      );
      const run = await runCli(['sync', '--once'], env, 120_000);
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toMatch(/"caught_up":20/);
      const { feed_requests_in_flight: inFlight } = sim.stats();
      expect(inFlight.max).toBeGreaterThanOrEqual(8);
      expect(inFlight.now).toBe(0);
    } finally {
      await sim.close();
    }
  }, 150_000);
});
