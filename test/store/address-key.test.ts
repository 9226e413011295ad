import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addressKeySql } from '../../src/store/address-key.js';
import { quoteSchema, type Store } from '../../src/store/db.js';
import { migratedStore } from './migrated-store.js';

let store: Store;
let dispose: () => Promise<void>;

beforeAll(async () => {
  ({ store, dispose } = await migratedStore('address_key'));
});
afterAll(() => dispose());

const key = async (value: string): Promise<string | null> => {
  const { rows } = await store.pool.query<{ key: string | null }>(
    `SELECT ${addressKeySql(quoteSchema(store.schema), '$1::text')} AS key`,
    [value],
  );
  return rows[0]!.key;
};

describe('address_key()', () => {
  it('removes exactly the Unicode White_Space and Cf characters, as JavaScript knows them', async () => {
    // Every code point but the surrogates and NUL (which text cannot hold), between two letters.
    const { rows } = await store.pool.query<{ c: number }>(
      `SELECT c FROM generate_series(1, 1114111) AS c
        WHERE c NOT BETWEEN 55296 AND 57343
          AND ${addressKeySql(quoteSchema(store.schema), `'a' || chr(c) || 'b'`)} = 'ab'
        ORDER BY c`,
    );
    const removed = rows.map((r) => r.c);
    const expected: number[] = [];
    for (let c = 1; c <= 0x10ffff; c++) {
      if (c >= 0xd800 && c <= 0xdfff) continue;
      if (/[\p{White_Space}\p{Cf}]/u.test(String.fromCodePoint(c))) expected.push(c);
    }
    expect(removed).toEqual(expected);
  }, 60_000);

  it.each([
    ['erin@example.com\u00a0', 'erin@example.com'],
    ['\u200bfrank@example.com', 'frank@example.com'],
    ['gre\u0301g@example.com', 'gr\u00e9g@example.com'],
    [' Ivan@Example.COM\t', 'ivan@example.com'],
    ['\u00c9lise@example.com', '\u00e9lise@example.com'],
  ])('keys %j as %j', async (value, expected) => {
    expect(await key(value)).toBe(expected);
  });

  it('keys nothing for an empty value or one longer than 320 characters', async () => {
    expect(await key(' \u00a0\u200b ')).toBeNull();
    expect(await key(`${'x'.repeat(320)}@example.com`)).toBeNull();
  });
});
