import { randomBytes } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import type { ServiceEvent } from '../../src/api/types.js';
import { PageError } from '../../src/errors.js';
import type { FeedPage } from '../../src/feed/page.js';
import { cursorGuard } from '../../src/sync/cursor-guard.js';

/** A page of `n` events whose ids, like its next_after, are `width` characters long. */
function page(seq: number, n: number, width: number): FeedPage {
  // Flat strings of their own: a padded one would share its padding and weigh nothing.
  const id = (i: number) => `${seq}_${i}_${randomBytes(width / 2).toString('hex')}`.slice(0, width);
  const events = Array.from({ length: n }, (_, i) => ({ id: id(i) }) as ServiceEvent);
  return {
    events,
    quarantine: [],
    filteredOut: 0,
    size: n,
    nextAfter: events.at(-1)?.id ?? null,
    last: false,
  };
}

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** The heap in use after a full collection. */
function heapAfterGc(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

describe('cursorGuard: what a run remembers of past pages', () => {
  it('does not grow with the number of pages: 40,000 more pages with ids of 1,000 characters', async () => {
    const check = cursorGuard(null, async () => false);
    let after: string | null = null;
    // Past the window of the latest ids (10,000), so what is measured is what comes after it.
    const warmUp = 11_000;
    const pages = warmUp + 40_000;
    let base = 0;
    for (let seq = 0; seq < pages; seq++) {
      if (seq === warmUp) base = heapAfterGc();
      const p = page(seq, 1, 1_000);
      await check(p, after);
      after = p.nextAfter;
    }
    const grown = heapAfterGc() - base;
    // The guard in use after the measure, so that it is not collected before it.
    await check(page(pages, 1, 10), after);
    // Remembering every next_after would hold 40,000 more strings of 1,000 bytes: about 40 MB.
    expect(grown).toBeLessThan(10 * 1024 * 1024);
  }, 120_000);

  it('still refuses a next_after it sent within its window', async () => {
    const check = cursorGuard(null, async () => false);
    const pages = [page(1, 2, 20), page(2, 2, 20), page(3, 2, 20)];
    let after: string | null = null;
    for (const p of pages) {
      await check(p, after);
      after = p.nextAfter;
    }
    const back = { ...page(4, 2, 20), nextAfter: pages[0]!.nextAfter };
    await expect(check(back, after)).rejects.toMatchObject({ code: 'CURSOR_LOOP' });
  });

  it('quotes a next_after in its messages by its start only', async () => {
    const check = cursorGuard(null, async () => false);
    const long = 'a'.repeat(400);
    const err = await check({ ...page(1, 2, 10), nextAfter: long }, long).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PageError);
    expect((err as PageError).code).toBe('CURSOR_STUCK');
    expect((err as PageError).message.length).toBeLessThan(250);
  });
});
