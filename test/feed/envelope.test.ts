import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_DATA_DEPTH, MAX_EMAIL_ID_LENGTH, readEnvelope } from '../../src/feed/envelope.js';
import { jsonText, nestedDeeperThan } from '../../src/feed/json-text.js';
import { normaliseTimestamp } from '../../src/feed/timestamp.js';
import { nested } from '../support/poison-items.js';

describe('normaliseTimestamp: RFC 3339 in, one UTC form per instant out', () => {
  it.each([
    ['2024-05-01T10:00:00.123Z', '2024-05-01T10:00:00.123Z'],
    ['2024-05-01T10:00:00Z', '2024-05-01T10:00:00.000Z'],
    ['2024-05-01T10:00:00.123456Z', '2024-05-01T10:00:00.123456Z'],
    ['2024-05-01T10:00:00.123000Z', '2024-05-01T10:00:00.123Z'],
    ['2024-05-01T10:00:00.1234Z', '2024-05-01T10:00:00.123400Z'],
    ['2024-05-01t10:00:00z', '2024-05-01T10:00:00.000Z'],
    ['2024-05-01T10:00:00z', '2024-05-01T10:00:00.000Z'],
    ['2024-05-01T10:00:00+02:00', '2024-05-01T08:00:00.000Z'],
    ['2024-05-01T10:00:00-0230', '2024-05-01T12:30:00.000Z'],
    ['2024-05-01T10:00:00+16:00', '2024-04-30T18:00:00.000Z'],
    ['2024-05-01T10:00:00+23:59', '2024-04-30T10:01:00.000Z'],
    ['2024-05-01T10:00:00.5-00:00', '2024-05-01T10:00:00.500Z'],
    ['2016-12-31T23:59:60Z', '2017-01-01T00:00:00.000Z'],
    ['2016-12-31T23:59:60.25Z', '2017-01-01T00:00:00.250Z'],
    ['2024-05-01T10:00:00.1234567890123Z', '2024-05-01T10:00:00.123456Z'],
    [`2024-05-01T10:00:00.${'9'.repeat(300)}Z`, '2024-05-01T10:00:00.999999Z'],
    ['0001-01-01T00:00:00Z', '0001-01-01T00:00:00.000Z'],
    ['0050-03-01T00:30:00+01:00', '0050-02-28T23:30:00.000Z'],
    ['2024-02-29T12:00:00Z', '2024-02-29T12:00:00.000Z'],
  ])('%s -> %s', (input, output) => {
    expect(normaliseTimestamp(input)).toBe(output);
  });

  it.each([
    'yesterday',
    '2024-05-01',
    '2024-05-01 10:00:00Z',
    '2024-05-01T10:00Z',
    '2024-05-01T10:00:00',
    '2024-13-01T10:00:00Z',
    '2023-02-29T10:00:00Z',
    '2024-05-01T24:00:00Z',
    '2024-05-01T10:60:00Z',
    '2024-05-01T10:00:61Z',
    '2024-05-01T10:00:00+24:00',
    '2024-05-01T10:00:00+01:60',
    '2024-05-01T10:00:00.Z',
    '0000-06-01T00:00:00Z',
    '0001-01-01T00:30:00+01:00',
    '9999-12-31T23:30:00-01:00',
  ])('refuses %s', (input) => {
    expect(normaliseTimestamp(input)).toBeNull();
  });
});

describe('readEnvelope: the store limits, checked before Postgres', () => {
  const base = { id: 'evt_1', type: 'email.delivered', created_at: '2024-05-01T10:00:00.000Z' };

  it('returns the event itself when nothing needs normalising, a copy with created_at otherwise', () => {
    const item = { ...base, data: { email_id: 'em_1' } };
    const same = readEnvelope(item);
    expect(same.ok && same.event).toBe(item);
    const shifted = readEnvelope({ ...item, created_at: '2024-05-01T12:00:00+02:00' });
    expect(shifted).toEqual({ ok: true, event: { ...item, created_at: '2024-05-01T10:00:00.000Z' } });
  });

  it('an email_id past the limit goes to quarantine on the five projected types only', () => {
    const long = 'e'.repeat(MAX_EMAIL_ID_LENGTH + 1);
    expect(readEnvelope({ ...base, data: { email_id: long } })).toEqual({
      ok: false,
      reason: `data.email_id longer than ${MAX_EMAIL_ID_LENGTH} characters`,
    });
    expect(readEnvelope({ ...base, data: { email_id: long.slice(1) } }).ok).toBe(true);
    expect(readEnvelope({ ...base, type: 'email.opened', data: { email_id: long } }).ok).toBe(true);
  });

  it('data nested past the limit goes to quarantine, at any depth, without a RangeError', () => {
    expect(readEnvelope({ ...base, data: nested(MAX_DATA_DEPTH) }).ok).toBe(true);
    for (const depth of [MAX_DATA_DEPTH + 1, 5_000, 200_000]) {
      expect(readEnvelope({ ...base, data: nested(depth) })).toEqual({
        ok: false,
        reason: `data nested deeper than ${MAX_DATA_DEPTH} levels`,
      });
    }
  });
});

describe('jsonText and nestedDeeperThan never recurse', () => {
  it('writes what JSON.stringify writes, for any JSON value', () => {
    const deep = nested(4_000);
    const deepText = `${'{"a":'.repeat(3_999)}{}${'}'.repeat(3_999)}`;
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const parsed = JSON.parse(JSON.stringify(value)) as unknown;
        expect(jsonText(parsed)).toBe(JSON.stringify(parsed));
        expect(jsonText({ nested: [deep, parsed] })).toBe(
          `{"nested":[${deepText},${JSON.stringify(parsed)}]}`,
        );
      }),
      { numRuns: 200 },
    );
  });

  it('writes 200,000 levels that JSON.stringify cannot', () => {
    const deep = JSON.parse(`${'['.repeat(200_000)}1${']'.repeat(200_000)}`) as unknown;
    expect(() => JSON.stringify(deep)).toThrow(RangeError);
    expect(jsonText(deep)).toBe(`${'['.repeat(200_000)}1${']'.repeat(200_000)}`);
  });

  it('counts depth the way the limit reads it', () => {
    expect(nestedDeeperThan({}, 1)).toBe(false);
    expect(nestedDeeperThan({ a: [] }, 1)).toBe(true);
    expect(nestedDeeperThan({ a: [1, 'x', null] }, 2)).toBe(false);
    expect(nestedDeeperThan({ a: 1, b: [{ c: {} }] }, 3)).toBe(true);
    expect(nestedDeeperThan(nested(300_000), 300_000)).toBe(false);
  });
});
