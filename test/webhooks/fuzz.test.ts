import fc from 'fast-check';
import type { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/db.js';
import { signWebhookPayload } from '../../src/webhooks/signature.js';
import { testConfig } from '../support/config.js';
import { uniqueSchema } from '../support/postgres.js';
import { uniquePrefix } from '../support/redis.js';
import {
  captureLogger,
  count,
  emailEvent,
  SECRET_NEW,
  SECRET_OLD,
  send,
  startTestReceiver,
  type TestReceiver,
} from './helpers.js';

const schema = uniqueSchema('wh_fuzz');
const prefix = uniquePrefix('wh-fuzz');
const LIMIT = 2048;
const config = testConfig(
  { schema, prefix },
  { WEBHOOK_SECRET: `${SECRET_OLD},${SECRET_NEW}`, WEBHOOK_MAX_BODY_BYTES: String(LIMIT) },
);
const logs = captureLogger();
let rx: TestReceiver;
let store: Store;
let pool: Pool;

beforeAll(async () => {
  rx = await startTestReceiver(config, logs.logger, { connections: 8, schema, prefix });
  ({ store, pool } = rx);
});
afterAll(() => rx?.close());

interface Input {
  kind: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Buffer;
}

const now = () => Math.floor(Date.now() / 1000);
const printable = fc.string({
  unit: fc.constantFrom(...' !#$%&()*+,-./0123456789:;<=>?@ABCXYZabcxyz=_~'),
  maxLength: 120,
});
const bytes = fc.uint8Array({ maxLength: 3 * LIMIT }).map((a) => Buffer.from(a));
const jsonText = fc.jsonValue({ maxDepth: 3 }).map((v) => Buffer.from(JSON.stringify(v) ?? 'null'));
/** Strings that look like the right field and are wrong. */
const badField = fc.oneof(
  fc.constantFrom(null, 0, true, '', [], {}, 'yesterday', '2024-02-30T00:00:00Z', '0000-01-01T00:00:00Z'),
  fc.constantFrom('2024-13-01T00:00:00Z', '2024-01-01', '2024-01-01T25:00:00Z', 'x'.repeat(600)),
);

/** Signature headers that must all fail for `body`. */
function badSignature(body: Buffer): fc.Arbitrary<Record<string, string>> {
  const t = now();
  const valid = signWebhookPayload(body, SECRET_NEW, t);
  const v1 = valid.split('v1=')[1]!;
  return fc.oneof(
    fc.constant({}),
    printable.map((h) => ({ 'service-signature': h })),
    fc.constant({ 'service-signature': signWebhookPayload(body, 'whsec_not_ours') }),
    fc
      .integer({ min: 310, max: 10 ** 9 })
      .map((d) => ({ 'service-signature': signWebhookPayload(body, SECRET_NEW, t - d) })),
    // An hour ahead at least: `t` is taken when the case is made, and a slow run must not
    // carry a timestamp dated a few seconds past the window back into it.
    fc
      .integer({ min: 3600, max: 10 ** 9 })
      .map((d) => ({ 'service-signature': signWebhookPayload(body, SECRET_NEW, t + d) })),
    fc.constant({ 'service-signature': `v1=${v1}` }),
    fc.constant({ 'service-signature': `t=${t}` }),
    fc.constant({ 'service-signature': `t=${t}.5,v1=${v1}` }),
    fc.constant({ 'service-signature': `t=${t},v1=${v1.slice(0, 63)}` }),
    fc.constant({ 'service-signature': `t=${t},v1=${v1}0` }),
    fc.constant({ 'service-signature': `t=${t},v0=${v1}` }),
    fc.constant({ 'service-signature': `t=${t},v1=${v1.toUpperCase()}` }),
    fc.constant({ 'x-service-signature': valid }),
    fc.nat({ max: v1.length - 1 }).map((i) => ({
      'service-signature': `t=${t},v1=${v1.slice(0, i)}${v1[i] === '0' ? '1' : '0'}${v1.slice(i + 1)}`,
    })),
  );
}

/** Extra headers with odd values; none may change the verdict. */
const noise = fc.dictionary(
  fc.constantFrom(
    'content-type',
    'x-request-id',
    'accept',
    'user-agent',
    'x-forwarded-for',
    'accept-encoding',
  ),
  printable,
  { maxKeys: 3 },
);

const unsigned: fc.Arbitrary<Input> = fc
  .tuple(
    fc.oneof(
      bytes,
      jsonText,
      fc.constant(Buffer.from(JSON.stringify(emailEvent()))),
      // Over the limit: refused before the signature is even looked at.
      fc.integer({ min: LIMIT + 1, max: 8 * LIMIT }).map((n) => Buffer.alloc(n, '{')),
    ),
    noise,
  )
  .chain(([body, extra]) =>
    badSignature(body).map((sig) => ({
      kind: 'unsigned',
      method: 'POST',
      path: '/webhooks',
      headers: { ...extra, ...sig },
      body,
    })),
  );

/** Validly signed bodies that are not JSON at all. */
const signedNotJson: fc.Arbitrary<Input> = fc
  .oneof(
    bytes,
    printable.map((s) => Buffer.from(`{${s}`)),
  )
  .filter((b) => b.length <= LIMIT && !isJson(b))
  .map((body) => ({ kind: 'signed-not-json', method: 'POST', path: '/webhooks', headers: {}, body }));

/** Validly signed JSON that is not an event envelope: any JSON, or an envelope with one field broken. */
const signedNotEnvelope: fc.Arbitrary<Input> = fc
  .oneof(
    fc
      .jsonValue({ maxDepth: 3 })
      .filter((v) => typeof v !== 'object' || v === null || Array.isArray(v) || !('id' in v)),
    fc
      .tuple(fc.constantFrom('id', 'type', 'created_at', 'data'), badField, fc.boolean())
      .map(([field, value, drop]) => {
        const event: Record<string, unknown> = emailEvent();
        if (drop) delete event[field];
        else
          event[field] =
            field === 'data' && typeof value === 'object' && !Array.isArray(value) && value !== null
              ? []
              : value;
        // Any non-empty string is a valid type, and up to 500 characters a valid id: break those too.
        if (field === 'type' && typeof event.type === 'string') event.type = '';
        if (field === 'id' && typeof event.id === 'string' && event.id.length <= 500) event.id = '';
        return event;
      }),
  )
  .map((v) => Buffer.from(JSON.stringify(v) ?? 'null'))
  .filter((b) => b.length <= LIMIT)
  .map((body) => ({ kind: 'signed-not-envelope', method: 'POST', path: '/webhooks', headers: {}, body }));

const wrongRoute: fc.Arbitrary<Input> = fc
  .tuple(
    fc.constantFrom('GET', 'PUT', 'DELETE', 'PATCH', 'POST', 'OPTIONS'),
    fc.oneof(
      printable.map((p) => `/${encodeURIComponent(p)}`),
      fc.constantFrom('/webhooks', '/healthz', '/webhooks/', '/WEBHOOKS', '/webhooks/x', '//webhooks'),
    ),
    jsonText,
  )
  .filter(
    ([method, path]) =>
      !(method === 'POST' && path === '/webhooks') && !(method === 'GET' && path === '/healthz'),
  )
  .map(([method, path, body]) => ({ kind: 'route', method, path, headers: {}, body }));

const inputs = fc.oneof(
  { weight: 4, arbitrary: unsigned },
  { weight: 2, arbitrary: signedNotJson },
  { weight: 3, arbitrary: signedNotEnvelope },
  { weight: 1, arbitrary: wrongRoute },
);

function isJson(b: Buffer): boolean {
  try {
    JSON.parse(b.toString('utf8'));
    return true;
  } catch {
    return false;
  }
}

/** The answers an input of each kind may get. */
const ALLOWED: Record<string, number[]> = {
  unsigned: [401, 413],
  'signed-not-json': [400],
  'signed-not-envelope': [400],
  route: [404, 405],
};

describe('serve-webhooks fuzz', () => {
  it('3,000 malformed requests: none answered 5xx, none stored as an event', async () => {
    const samples = fc.sample(inputs, { numRuns: 3_000, seed: 20_250_101 });
    const statuses = new Map<string, Map<number, number>>();
    const unexpected: { kind: string; status: number; headers: string; body: string }[] = [];
    let next = 0;
    const worker = async (): Promise<void> => {
      for (let i = next++; i < samples.length; i = next++) {
        const input = samples[i]!;
        const headers = { ...input.headers };
        if (input.kind.startsWith('signed'))
          headers['service-signature'] = signWebhookPayload(input.body, SECRET_NEW);
        const method = input.method;
        const res = await send(pool, {
          method,
          path: input.path,
          headers,
          ...(method === 'GET' ? {} : { body: input.body }),
        }).catch((err: unknown) => ({ status: -1, body: String(err), headers: {} }));
        const byKind = statuses.get(input.kind) ?? new Map<number, number>();
        byKind.set(res.status, (byKind.get(res.status) ?? 0) + 1);
        statuses.set(input.kind, byKind);
        if (!ALLOWED[input.kind]!.includes(res.status)) {
          unexpected.push({
            kind: input.kind,
            status: res.status,
            headers: JSON.stringify(headers),
            body: input.body.toString('utf8').slice(0, 200),
          });
        }
      }
    };
    // Bounded concurrency: eight at a time, over a pool of eight sockets.
    await Promise.all(Array.from({ length: 8 }, worker));

    expect(unexpected.slice(0, 5)).toEqual([]);
    // Every kind and every allowed answer came up.
    for (const [kind, allowed] of Object.entries(ALLOWED)) {
      expect([...(statuses.get(kind)?.keys() ?? [])].sort()).toEqual([...allowed].sort());
    }
    expect(await count(store, 'events')).toBe(0);
    expect(await count(store, 'outbox')).toBe(0);
    // Signed non-events are kept, raw and once each; unsigned input never reaches the store.
    const kept = await count(store, 'quarantine');
    const signed = samples.filter((s) => s.kind.startsWith('signed'));
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThanOrEqual(signed.length);
    // Still healthy afterwards: a valid delivery is stored.
    const event = JSON.stringify(emailEvent());
    const ok = await send(pool, {
      body: event,
      headers: { 'service-signature': signWebhookPayload(event, SECRET_OLD) },
    });
    expect(ok.status).toBe(200);
  }, 120_000);

  it('logs hold no secret', () => {
    const text = logs.text();
    expect(text).not.toContain(SECRET_NEW);
    expect(text).not.toContain(SECRET_OLD);
  });
});
