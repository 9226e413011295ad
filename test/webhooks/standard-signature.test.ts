import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { describe, expect, it } from 'vitest';
import { signStandardWebhook, verifyStandardWebhook } from '../../src/index.js';
import { checkStandardSignature, standardSecretKey } from '../../src/webhooks/standard-signature.js';

const V = JSON.parse(
  readFileSync(new URL('../fixtures/standard-webhooks-vectors.json', import.meta.url), 'utf8'),
) as {
  secret: string;
  secret_without_prefix: string;
  msg_id: string;
  timestamp: number;
  payload: string;
  signature: string;
  other_signatures: string[];
  invalid_signatures: string[];
};

const headersOf = (signature: string, id = V.msg_id, t = V.timestamp) => ({
  'webhook-id': id,
  'webhook-timestamp': String(t),
  'webhook-signature': signature,
});
const at = { now: V.timestamp };

describe('Standard Webhooks: the published vectors', () => {
  it('signs the vector to its published signature', () => {
    expect(signStandardWebhook(V.payload, V.secret, V.msg_id, V.timestamp)).toBe(V.signature);
  });

  it('verifies the vector, with and without the whsec_ prefix, and from the svix-* headers', () => {
    expect(verifyStandardWebhook(V.payload, headersOf(V.signature), V.secret, at)).toBe(true);
    expect(verifyStandardWebhook(V.payload, headersOf(V.signature), V.secret_without_prefix, at)).toBe(true);
    const svix = {
      'svix-id': V.msg_id,
      'svix-timestamp': String(V.timestamp),
      'svix-signature': V.signature,
    };
    expect(verifyStandardWebhook(Buffer.from(V.payload), svix, V.secret, at)).toBe(true);
  });

  it('accepts a header of several signatures (a rotation) when any one matches', () => {
    const several = [...V.other_signatures, V.signature, V.other_signatures[0]].join(' ');
    expect(verifyStandardWebhook(V.payload, headersOf(several), V.secret, at)).toBe(true);
    expect(verifyStandardWebhook(V.payload, headersOf(V.other_signatures.join(' ')), V.secret, at)).toBe(
      false,
    );
  });

  it.each(V.invalid_signatures)('refuses the invalid signature %s', (signature) => {
    expect(verifyStandardWebhook(V.payload, headersOf(signature), V.secret, at)).toBe(false);
  });

  it('refuses another body, another id, another timestamp', () => {
    expect(verifyStandardWebhook(`${V.payload} `, headersOf(V.signature), V.secret, at)).toBe(false);
    expect(verifyStandardWebhook(V.payload, headersOf(V.signature, 'msg_other'), V.secret, at)).toBe(false);
    const moved = { now: V.timestamp + 1 };
    expect(
      verifyStandardWebhook(V.payload, headersOf(V.signature, V.msg_id, V.timestamp + 1), V.secret, moved),
    ).toBe(false);
  });
});

describe('Standard Webhooks: the packages as signers', () => {
  const secret = `whsec_${Buffer.from('feedsync standard webhooks test key').toString('base64')}`;
  const body = JSON.stringify({
    type: 'email.delivered',
    created_at: '2025-01-01T00:00:00.000Z',
    data: { é: 1 },
  });

  it('verifies what the standardwebhooks package signs', () => {
    const t = Math.floor(Date.now() / 1000);
    const signature = new StandardWebhook(secret).sign('msg_std_1', new Date(t * 1000), body);
    expect(verifyStandardWebhook(body, headersOf(signature, 'msg_std_1', t), secret)).toBe(true);
  });

  it('verifies what the svix package signs, under the svix-* headers', () => {
    const t = Math.floor(Date.now() / 1000);
    const signature = new SvixWebhook(secret).sign('msg_svix_1', new Date(t * 1000), body);
    const headers = { 'svix-id': 'msg_svix_1', 'svix-timestamp': String(t), 'svix-signature': signature };
    expect(verifyStandardWebhook(Buffer.from(body), headers, secret)).toBe(true);
  });

  it('signs what both packages verify', () => {
    const t = Math.floor(Date.now() / 1000);
    const signature = signStandardWebhook(body, secret, 'msg_ours_1', t);
    const headers = headersOf(signature, 'msg_ours_1', t);
    expect(new StandardWebhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
    expect(
      new SvixWebhook(secret).verify(body, {
        'svix-id': headers['webhook-id'],
        'svix-timestamp': headers['webhook-timestamp'],
        'svix-signature': headers['webhook-signature'],
      }),
    ).toEqual(JSON.parse(body));
  });

  it('holds the same 300 s window both ways as the packages', () => {
    const now = Math.floor(Date.now() / 1000);
    for (const [t, inside] of [
      [now - 300, true],
      [now + 300, true],
      [now - 301, false],
      [now + 301, false],
    ] as const) {
      const signature = new StandardWebhook(secret).sign('msg_window', new Date(t * 1000), body);
      const headers = headersOf(signature, 'msg_window', t);
      expect(checkStandardSignature(body, headers, [standardSecretKey(secret)!], { now })).toBe(
        inside ? 'valid' : 'stale',
      );
    }
  });

  it('verifies under any key of a rotation', () => {
    const old = `whsec_${Buffer.from('the old key').toString('base64')}`;
    const t = Math.floor(Date.now() / 1000);
    const signature = new SvixWebhook(old).sign('msg_rot', new Date(t * 1000), body);
    const keys = [standardSecretKey(secret)!, standardSecretKey(old)!];
    expect(checkStandardSignature(body, headersOf(signature, 'msg_rot', t), keys)).toBe('valid');
    expect(checkStandardSignature(body, headersOf(signature, 'msg_rot', t), keys.slice(0, 1))).toBe(
      'mismatch',
    );
  });
});

describe('Standard Webhooks: malformed input', () => {
  it('says why headers are refused', () => {
    const key = [standardSecretKey(V.secret)!];
    expect(checkStandardSignature(V.payload, {}, key, at)).toBe('missing');
    expect(checkStandardSignature(V.payload, { 'webhook-id': V.msg_id }, key, at)).toBe('malformed');
    expect(checkStandardSignature(V.payload, headersOf(V.signature, V.msg_id, Number.NaN), key, at)).toBe(
      'malformed',
    );
    expect(checkStandardSignature(V.payload, headersOf('v2,abc'), key, at)).toBe('malformed');
    expect(
      checkStandardSignature(V.payload, { ...headersOf(V.signature), 'webhook-id': ['a', 'b'] }, key, at),
    ).toBe('malformed');
    expect(checkStandardSignature(V.payload, headersOf(V.signature), key, { now: V.timestamp + 301 })).toBe(
      'stale',
    );
  });

  it('refuses secrets that are no base64 key', () => {
    for (const secret of ['', 'whsec_', 'whsec_not base64!', 'whsec_abc']) {
      expect(standardSecretKey(secret)).toBeNull();
      expect(verifyStandardWebhook(V.payload, headersOf(V.signature), secret, at)).toBe(false);
    }
  });

  it('never throws, whatever the headers and secret', () => {
    const value = fc.oneof(fc.string(), fc.constant(undefined), fc.array(fc.string(), { maxLength: 3 }));
    fc.assert(
      fc.property(
        fc.record({
          'webhook-id': value,
          'webhook-timestamp': value,
          'webhook-signature': value,
          'svix-id': value,
        }),
        fc.string(),
        fc.uint8Array({ maxLength: 64 }),
        (headers, secret, raw) => {
          expect(typeof verifyStandardWebhook(Buffer.from(raw), headers, secret, at)).toBe('boolean');
        },
      ),
      { numRuns: 500 },
    );
  });
});
