import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { signWebhookPayload, verifyWebhookSignature } from '../../src/index.js';

interface Vector {
  name: string;
  body_base64: string;
  secret: string;
  header: string;
  now: number;
  valid: boolean;
}
const { vectors } = JSON.parse(
  readFileSync(new URL('../fixtures/signature-vectors.json', import.meta.url), 'utf8'),
) as {
  vectors: Vector[];
};

describe('verifyWebhookSignature', () => {
  it.each(vectors.map((v) => [v.name, v] as const))('vector: %s', (_name, v) => {
    const body = Buffer.from(v.body_base64, 'base64');
    expect(verifyWebhookSignature(body, v.header, v.secret, { now: v.now })).toBe(v.valid);
  });

  it('accepts a string body the same as its UTF-8 bytes', () => {
    const header = signWebhookPayload('{"a":"é"}', 'whsec_x', 1000);
    expect(verifyWebhookSignature(Buffer.from('{"a":"é"}'), header, 'whsec_x', { now: 1000 })).toBe(true);
  });

  it('honours a custom tolerance', () => {
    const header = signWebhookPayload('{}', 'whsec_x', 1000);
    expect(verifyWebhookSignature('{}', header, 'whsec_x', { now: 1010, toleranceSec: 5 })).toBe(false);
    expect(verifyWebhookSignature('{}', header, 'whsec_x', { now: 1005, toleranceSec: 5 })).toBe(true);
  });

  it('uses the system clock by default', () => {
    expect(verifyWebhookSignature('{}', signWebhookPayload('{}', 'whsec_x'), 'whsec_x')).toBe(true);
    expect(verifyWebhookSignature('{}', signWebhookPayload('{}', 'whsec_x', 1000), 'whsec_x')).toBe(false);
  });

  it('is false, never a throw, for malformed headers and secrets', () => {
    const good = signWebhookPayload('{}', 'whsec_x', 1000);
    const bad: unknown[] = [
      '',
      ',,,',
      '=',
      't=',
      'v1=',
      't=1000,v1=',
      't=abc,v1=00',
      `t=-1000,${good.split(',')[1]}`,
      `t=1e3,${good.split(',')[1]}`,
      `t=1000,v1=${'A'.repeat(64)}`,
      `${good},t=99`,
      undefined,
      null,
      42,
    ];
    for (const header of bad) {
      expect(verifyWebhookSignature('{}', header as string, 'whsec_x', { now: 1000 })).toBe(false);
    }
    expect(verifyWebhookSignature('{}', good, '', { now: 1000 })).toBe(false);
  });

  it('tolerates whitespace around entries and unknown keys', () => {
    const [t, v1] = signWebhookPayload('{}', 'whsec_x', 1000).split(',');
    expect(verifyWebhookSignature('{}', ` ${t} , v0=zz , ${v1} `, 'whsec_x', { now: 1000 })).toBe(true);
  });

  it('property: a signed body verifies; one changed byte never does', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 1, maxLength: 512 }),
        fc.string({ minLength: 1, maxLength: 64 }),
        fc.nat(),
        fc.integer({ min: 1, max: 255 }),
        (bytes, secret, index, delta) => {
          const body = Buffer.from(bytes);
          const header = signWebhookPayload(body, secret, 1_700_000_000);
          expect(verifyWebhookSignature(body, header, secret, { now: 1_700_000_000 })).toBe(true);
          const changed = Buffer.from(body);
          const i = index % changed.length;
          changed[i] = (changed[i]! + delta) % 256;
          expect(verifyWebhookSignature(changed, header, secret, { now: 1_700_000_000 })).toBe(false);
        },
      ),
      { numRuns: 500 },
    );
  });
});
