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
  it('lets the fetcher ask for a page while the buffer has room, whatever the bytes (the budget weighs them)', () => {
    const held = new HeldPages<{ bytes: number }>(LIMITS);
    expect(held.roomForAnother()).toBe(true);
    held.push({ bytes: 16 * MiB });
    held.push({ bytes: 1 });
    expect(held.bytes).toBe(16 * MiB + 1);
    expect(held.roomForAnother()).toBe(true);
    // A load takes at least one page and no more than loadBytes (32 - 16 MiB): the big page alone.
    const load = held.take();
    expect(load.map((p) => p.bytes)).toEqual([16 * MiB]);
    // Until its commit ends, the load still counts.
    expect(held.bytes).toBe(16 * MiB + 1);
    held.committed(load);
    expect(held.bytes).toBe(1);
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

describe('catchUp, by default, holds no more than its budget plus one answer, whatever the page size', () => {
  it.each([1, 2, 4, 8])('%i MiB pages (the response limit: 8 MiB)', async (size) => {
    const bytes = size * MiB;
    const feed = feedOf(40, bytes);
    const { pageAfter } = feed;
    const { maxHeldBytes, maxPageBytes, maxPerCommit } = HELD_PAGES_DEFAULTS;
    const budget = new ByteBudget(maxHeldBytes);
    const loads: number[] = [];
    const applied: string[] = [];
    const result = await catchUp({
      source: 's',
      start: null,
      signal: new AbortController().signal,
      isStored: async () => false,
      budget,
      // Loads wait for a full load (by pages or bytes) or a request waiting for room, never for the clock.
      maxCommitDelayMs: 600_000,
      fetchPage: async (after) => {
        await tick();
        return pageAfter(after);
      },
      apply: async (batch: ApplyBatch) => {
        loads.push(batch.events.length);
        // Commits are slower than fetches, so the fetcher runs ahead as far as it may.
        for (let i = 0; i < 5; i++) await tick();
        applied.push(...batch.events.map((e) => e.id));
        return { ...nothingApplied(), inserted: [...batch.events] };
      },
    });
    expect(result).toMatchObject({ status: 'caught-up', stored: 40, cursor: 'ev_0040' });
    expect(applied).toEqual(feed.events.map((e) => e.id));
    expect(budget.peak).toBeLessThanOrEqual(maxHeldBytes + maxPageBytes);
    expect(budget.held).toBe(0);
    // Loads are bounded by bytes too (the budget less one answer of the largest size); maxPerCommit is the cap of small pages.
    const loadMiB = (maxHeldBytes - maxPageBytes) / MiB;
    expect(Math.max(...loads)).toBe(Math.max(1, Math.min(maxPerCommit, Math.floor(loadMiB / size))));
  });
});

describe('lanes of one process share one budget of the feed bytes', () => {
  it.each([4, 8])(
    '%i lanes with pages near the response limit never hold more than the budget plus one answer',
    async (lanes) => {
      const { maxHeldBytes, maxPageBytes } = HELD_PAGES_DEFAULTS;
      const budget = new ByteBudget(maxHeldBytes);
      const bytes = maxPageBytes - 1_000;
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
            await tick();
            return pageAfter(after);
          },
          apply: async (batch: ApplyBatch) => {
            if (budget.wanted) waitedForRoom++;
            for (let i = 0; i < 3; i++) await tick();
            return { ...nothingApplied(), inserted: [...batch.events] };
          },
        }).then((result) => ({ result, events }));
      };
      const results = await Promise.all(Array.from({ length: lanes }, (_, n) => lane(n)));
      for (const { result, events } of results) {
        expect(result).toMatchObject({ status: 'caught-up', stored: events.length });
      }
      expect(budget.peak).toBeLessThanOrEqual(maxHeldBytes + maxPageBytes);
      expect(budget.held).toBe(0);
      // The lanes did contend: some commit ran while a request waited for room.
      expect(waitedForRoom).toBeGreaterThan(0);
    },
  );
});
