import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureCursor, getCursor, setCursor } from '../../src/store/cursor.js';
import type { Store } from '../../src/store/db.js';
import { migratedStore } from './migrated-store.js';

let store: Store;
let dispose: () => Promise<void>;

beforeAll(async () => {
  ({ store, dispose } = await migratedStore('cursor'));
});
afterAll(() => dispose());

describe('cursor', () => {
  it('is null until created, then starts at the beginning with the given types', async () => {
    expect(await getCursor(store, 'a')).toBeNull();
    const row = await ensureCursor(store, 'a', ['email.bounced', 'email.delivered']);
    expect(row).toMatchObject({
      source: 'a',
      afterId: null,
      types: ['email.bounced', 'email.delivered'],
      lastSuccessAt: null,
    });
    expect(row.updatedAt).toBeInstanceOf(Date);
    expect(await getCursor(store, 'a')).toEqual(row);
  });

  it('ensureCursor keeps a stored row as it is, types included, for the caller to compare', async () => {
    await ensureCursor(store, 'b', null);
    await setCursor(store, 'b', 'evt_9');
    const again = await ensureCursor(store, 'b', ['email.sent']);
    expect(again).toMatchObject({ afterId: 'evt_9', types: null });
  });

  it('ensureCursor from several callers at once yields one row', async () => {
    const rows = await Promise.all([1, 2, 3].map(() => ensureCursor(store, 'c', ['email.sent'])));
    expect(new Set(rows.map((r) => JSON.stringify(r))).size).toBe(1);
  });

  it('setCursor moves and resets, replacing types only when given, and creates a missing row', async () => {
    await setCursor(store, 'd', 'evt_1');
    expect(await getCursor(store, 'd')).toMatchObject({ afterId: 'evt_1', types: null });
    await setCursor(store, 'd', 'evt_2', ['contact.subscribed']);
    expect(await getCursor(store, 'd')).toMatchObject({ afterId: 'evt_2', types: ['contact.subscribed'] });
    await setCursor(store, 'd', null);
    expect(await getCursor(store, 'd')).toMatchObject({ afterId: null, types: ['contact.subscribed'] });
    await setCursor(store, 'd', null, null);
    expect(await getCursor(store, 'd')).toMatchObject({ afterId: null, types: null });
  });
});
