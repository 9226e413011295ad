import { setImmediate as tick } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { ServiceEvent } from '../../src/api/types.js';
import type { FetchedPage } from '../../src/feed/feed-client.js';
import { type ApplyBatch, nothingApplied } from '../../src/store/applier.js';
import { ByteBudget } from '../../src/sync/byte-budget.js';
import { catchUp } from '../../src/sync/catch-up.js';
import { HELD_PAGES_DEFAULTS, HeldPages } from '../../src/sync/held-pages.js';

const MiB = 1024 * 1024;
const LIMITS = { maxBuffered: 20, maxPerCommit: 10, maxHeldBytes: 32 * MiB, maxPageBytes: 16 * MiB };

describe('HeldPages: what a catch-up holds, in pages and bytes', () => {
  it('lets the fetcher ask for a page only while the largest answer still fits', () => {
    const held = new HeldPages<{ bytes: number }>(LIMITS);
    expect(held.roomForAnother()).toBe(true);
    held.push({ bytes: 16 * MiB });
    expect(held.bytes).toBe(16 * MiB);
    expect(held.roomForAnother()).toBe(true);
    held.push({ bytes: 1 });
    expect(held.roomForAnother()).toBe(false);
    // A load takes at least one page and no more than loadBytes (32 - 16 MiB): the big page alone.
    const load = held.take();
    expect(load.map((p) => p.bytes)).toEqual([16 * MiB]);
    // Until its commit ends, the load still counts.
    expect(held.bytes).toBe(16 * MiB + 1);
    expect(held.roomForAnother()).toBe(false);
    held.committed(load);
    expect(held.bytes).toBe(1);
    expect(held.roomForAnother()).toBe(true);
  });

  it('reads a page larger than the budget alone rather than never', () => {
    const held = new HeldPages<{ bytes: number }>({ ...LIMITS, maxPageBytes: 64 * MiB });
    expect(held.roomForAnother()).toBe(true);
    held.push({ bytes: 40 * MiB });
    expect(held.roomForAnother()).toBe(false);
    expect(held.take()).toHaveLength(1);
  });

  it('keeps the page counts for small pages: 20 buffered, loads of 10', () => {
    const held = new HeldPages<{ bytes: number }>(LIMITS);
    for (let i = 0; i < 20; i++) {
      expect(held.roomForAnother()).toBe(true);
      held.push({ bytes: 30_000 });
    }
    expect(held.roomForAnother()).toBe(false);
    expect(held.fullLoad()).toBe(true);
    expect(held.take()).toHaveLength(10);
    expect(held.roomForAnother()).toBe(true);
  });

  it('calls a load full by bytes before it has ten pages', () => {
    const held = new HeldPages<{ bytes: number }>(LIMITS);
    held.push({ bytes: 8 * MiB });
    expect(held.fullLoad()).toBe(false);
    held.push({ bytes: 8 * MiB });
    expect(held.fullLoad()).toBe(true);
    expect(held.take()).toHaveLength(2);
  });
});

/** A feed of `pages` pages of `bytes` each (as their responses' sizes say), one event a page. */
function feedOf(pages: number, bytes: number) {
  const events: ServiceEvent[] = Array.from({ length: pages }, (_, i) => ({
    id: `ev_${String(i + 1).padStart(4, '0')}`,
    type: 'email.delivered',
    created_at: '2024-05-01T00:00:00Z',
    data: { email_id: `em_${i}`, to: [] },
  }));
  const pageAfter = (after: string | null): FetchedPage => {
    const at = after === null ? 0 : events.findIndex((e) => e.id === after) + 1;
    const list = events.slice(at, at + 1);
    return {
      events: list,
      quarantine: [],
      filteredOut: 0,
      size: list.length,
      nextAfter: list[0]?.id ?? after,
      last: list.length === 0,
      bytes: list.length === 0 ? 20 : bytes,
    };
  };
  return { events, pageAfter };
}

describe('catchUp, by default, holds no more response bytes than its budget, whatever the page size', () => {
  it.each([1, 2, 4, 8])('%i MiB pages (the response limit: 8 MiB)', async (size) => {
    const bytes = size * MiB;
    const feed = feedOf(40, bytes);
    const { pageAfter } = feed;
    let held = 0;
    let peakBeforeFetch = 0;
    const loads: number[] = [];
    const applied: string[] = [];
    const result = await catchUp({
      source: 's',
      start: null,
      signal: new AbortController().signal,
      isStored: async () => false,
      // Loads wait for a full load (by pages or bytes) or a fetcher waiting for room, never for the clock.
      maxCommitDelayMs: 600_000,
      fetchPage: async (after) => {
        // What is held when a request starts, plus the answer it may bring.
        peakBeforeFetch = Math.max(peakBeforeFetch, held + HELD_PAGES_DEFAULTS.maxPageBytes);
        await tick();
        const page = pageAfter(after);
        held += page.bytes;
        return page;
      },
      apply: async (batch: ApplyBatch) => {
        loads.push(batch.events.length);
        // Commits are slower than fetches, so the fetcher runs ahead as far as it may.
        for (let i = 0; i < 5; i++) await tick();
        applied.push(...batch.events.map((e) => e.id));
        held -= batch.events.length * bytes;
        return {
          status: 'applied',
          inserted: [...batch.events],
          duplicates: 0,
          unstorable: [],
          quarantined: 0,
          conflicts: 0,
          firstConflicts: 0,
          contactsWithoutEmail: 0,
          outboxRows: 0,
          outbox: [],
        };
      },
    });
    expect(result).toMatchObject({ status: 'caught-up', stored: 40, cursor: 'ev_0040' });
    expect(applied).toEqual(feed.events.map((e) => e.id));
    const { maxHeldBytes, maxPageBytes, maxPerCommit } = HELD_PAGES_DEFAULTS;
    expect(peakBeforeFetch).toBeLessThanOrEqual(maxHeldBytes);
    // Loads are bounded by bytes too (the budget less one answer of the largest size); maxPerCommit is the cap of small pages.
    const loadMiB = (maxHeldBytes - maxPageBytes) / MiB;
    expect(Math.max(...loads)).toBe(Math.max(1, Math.min(maxPerCommit, Math.floor(loadMiB / size))));
  });
});

describe('lanes of one process share one budget of response bytes', () => {
  it.each([4, 8])(
    '%i lanes with pages near the response limit never hold more than the budget together',
    async (lanes) => {
      const { maxHeldBytes, maxPageBytes } = HELD_PAGES_DEFAULTS;
      const budget = new ByteBudget(maxHeldBytes);
      const bytes = maxPageBytes - 1_000;
      // A real count over every lane: answers on their way (an answer's worth each) and pages not yet committed.
      let held = 0;
      let peak = 0;
      let waitedForRoom = 0;
      const lane = async (n: number) => {
        const { events, pageAfter } = feedOf(6, bytes);
        return catchUp({
          source: `s${n}`,
          start: null,
          signal: new AbortController().signal,
          isStored: async () => false,
          budget,
          maxCommitDelayMs: 0,
          fetchPage: async (after) => {
            if (budget.held > budget.capacity) throw new Error('the budget was exceeded');
            held += maxPageBytes;
            peak = Math.max(peak, held);
            await tick();
            const page = pageAfter(after);
            held -= maxPageBytes - page.bytes;
            return page;
          },
          apply: async (batch: ApplyBatch) => {
            if (budget.held >= budget.capacity - maxPageBytes) waitedForRoom++;
            for (let i = 0; i < 3; i++) await tick();
            held -= batch.events.length * bytes;
            return { ...nothingApplied(), inserted: [...batch.events] };
          },
        }).then((result) => ({ result, events }));
      };
      const results = await Promise.all(Array.from({ length: lanes }, (_, n) => lane(n)));
      for (const { result, events } of results) {
        expect(result).toMatchObject({ status: 'caught-up', stored: events.length });
      }
      expect(peak).toBeLessThanOrEqual(maxHeldBytes);
      expect(budget.held).toBe(0);
      // The lanes did contend: some commit ran while the budget had no room for another answer.
      expect(waitedForRoom).toBeGreaterThan(0);
    },
  );

  it('a lane waiting for room leaves when its signal aborts, taking nothing', async () => {
    const budget = new ByteBudget(10);
    expect(await budget.reserve(8, new AbortController().signal)).toBe(8);
    const stop = new AbortController();
    const waiting = budget.reserve(8, stop.signal);
    stop.abort(new Error('stopped'));
    await expect(waiting).rejects.toThrow('stopped');
    budget.release(8);
    expect(budget.held).toBe(0);
    // A request larger than the budget takes all of it, once it is free: read alone rather than never.
    expect(await budget.reserve(64, new AbortController().signal)).toBe(10);
  });
});
