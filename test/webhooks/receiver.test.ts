import { connect } from 'node:net';
import type { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/db.js';
import { signWebhookPayload } from '../../src/webhooks/signature.js';
import { startWebhookService, type WebhookService } from '../../src/webhooks/webhook-service.js';
import { testConfig } from '../support/config.js';
import { dropSchema, uniqueSchema } from '../support/postgres.js';
import { waitFor } from '../support/processes.js';
import { queuePrefixName, TEST_QUEUE_BACKEND } from '../support/queues.js';
import {
  captureLogger,
  count,
  deliver,
  emailEvent,
  jobIds,
  poolFor,
  SECRET_NEW,
  SECRET_OLD,
  send,
  startTestReceiver,
  type TestReceiver,
} from './helpers.js';

const schema = uniqueSchema('wh_receiver');
const prefix = queuePrefixName('wh-receiver');
const LIMIT = 4096;
const env = { WEBHOOK_SECRET: `${SECRET_OLD}, ${SECRET_NEW}`, WEBHOOK_MAX_BODY_BYTES: String(LIMIT) };
const config = testConfig({ schema, prefix }, env);
const logs = captureLogger();
let rx: TestReceiver;
let store: Store;
let service: WebhookService;
let pool: Pool;

beforeAll(async () => {
  rx = await startTestReceiver(config, logs.logger, { connections: 4, schema, prefix });
  ({ store, service, pool } = rx);
});
afterAll(() => rx?.close());

const events = () => count(store, 'events');
/** A header of the right shape and time, signing other bytes: the body is read, then refused as a mismatch. */
const mayVerify = () => signWebhookPayload('other bytes', SECRET_NEW);
const quarantined = () => count(store, 'quarantine');

describe('serve-webhooks: stored deliveries', () => {
  it('stores a signed email event, answers 200 after the commit, and its job reaches BullMQ', async () => {
    const event = emailEvent('email.delivered');
    const res = await deliver(pool, JSON.stringify(event));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ received: true, id: event.id, stored: true, duplicate: false });
    const { rows } = await store.pool.query(
      `SELECT type, received_via FROM "${schema}".events WHERE id = $1`,
      [event.id],
    );
    expect(rows).toEqual([{ type: 'email.delivered', received_via: 'webhook' }]);
    const status = await store.pool.query(`SELECT status FROM "${schema}".email_status WHERE email_id = $1`, [
      event.data.email_id,
    ]);
    expect(status.rows).toEqual([{ status: 'delivered' }]);
    const jobId = `default/${event.id}`;
    await waitFor(async () => (await jobIds(prefix, config.queues.emailEvents)).includes(jobId), {
      what: 'the job of the webhook event',
    });
  });

  it('answers a duplicate 200 and stores it once, with one job', async () => {
    const event = emailEvent('email.bounced');
    const body = JSON.stringify(event);
    expect((await deliver(pool, body)).body.duplicate).toBe(false);
    const again = await deliver(pool, body);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ stored: true, duplicate: true });
    expect(await count(store, 'events', `id = '${event.id}'`)).toBe(1);
    expect(await count(store, 'outbox', `event_id = '${event.id}'`)).toBe(1);
    await service.relay.drain();
    const ids = await jobIds(prefix, config.queues.emailEvents);
    expect(ids.filter((id) => id === `default/${event.id}`)).toHaveLength(1);
  });

  it('stores webhook.test and answers 200; it gets no outbox row and no job', async () => {
    const event = {
      type: 'webhook.test',
      id: 'evt_test_receiver',
      created_at: new Date().toISOString(),
      data: { webhook_id: 'wh_1' },
    };
    const res = await deliver(pool, JSON.stringify(event));
    expect(res.status).toBe(200);
    expect(res.body.stored).toBe(true);
    expect(await count(store, 'events', `id = 'evt_test_receiver'`)).toBe(1);
    expect(await count(store, 'outbox', `event_id = 'evt_test_receiver'`)).toBe(0);
  });

  it("keeps the client's records as the feed does: a complaint and an unsubscribe are suppressions", async () => {
    const complained = emailEvent('email.complained', {
      data: { email_id: 'em_wh_records', to: [' Angry@Example.com'] },
    });
    const unsubscribed = emailEvent('contact.unsubscribed', { data: { email: 'Leaver@Example.com' } });
    const unkeyed = emailEvent('contact.subscribed', { data: {} });
    for (const event of [complained, unsubscribed, unkeyed]) {
      expect((await deliver(pool, JSON.stringify(event))).status).toBe(200);
    }
    const { rows } = await store.pool.query(
      `SELECT address, reason, event_id FROM "${schema}".suppressions WHERE address IN ('angry@example.com', 'leaver@example.com') ORDER BY address`,
    );
    expect(rows).toEqual([
      { address: 'angry@example.com', reason: 'complained', event_id: complained.id },
      { address: 'leaver@example.com', reason: 'unsubscribed', event_id: unsubscribed.id },
    ]);
    expect(await count(store, 'contact_status', `email = 'leaver@example.com'`)).toBe(1);
    // The one without data.email is stored and logged, not projected; the log holds no address.
    expect(await count(store, 'events', `id = '${unkeyed.id}'`)).toBe(1);
    expect(logs.text()).toContain('contact event without a usable data.email');
    expect(logs.text().toLowerCase()).not.toMatch(/angry@|leaver@/);
  });

  it('accepts either secret of a rotation, and a header with several v1 values', async () => {
    const old = emailEvent('email.sent');
    expect((await deliver(pool, JSON.stringify(old), SECRET_OLD)).status).toBe(200);
    const both = JSON.stringify(emailEvent('email.sent'));
    const t = Math.floor(Date.now() / 1000);
    const wrong = signWebhookPayload(both, 'whsec_someone_else', t).split('v1=')[1];
    const right = signWebhookPayload(both, SECRET_OLD, t).split('v1=')[1];
    const header = `t=${t}, v1=${wrong}, v1=${right}`;
    expect((await send(pool, { body: both, headers: { 'service-signature': header } })).status).toBe(200);
  });
});

describe('serve-webhooks: refusals', () => {
  it.each([
    ['no signature header', (_body: string) => undefined],
    ['an empty header', () => ''],
    ['garbage', () => 'hello'],
    ['no t', (body: string) => signWebhookPayload(body, SECRET_NEW).replace(/^t=\d+,/, '')],
    ['no v1', (body: string) => signWebhookPayload(body, SECRET_NEW).replace(/,v1=.*$/, '')],
    ['a wrong secret', (body: string) => signWebhookPayload(body, 'whsec_wrong_secret_value')],
    ['t 310 s in the past', (body: string) => signWebhookPayload(body, SECRET_NEW, now() - 310)],
    ['t 310 s in the future', (body: string) => signWebhookPayload(body, SECRET_NEW, now() + 310)],
    ['a signature of another body', () => signWebhookPayload('{}', SECRET_NEW)],
    ['an uppercase v1', (body: string) => signWebhookPayload(body, SECRET_NEW).toUpperCase()],
  ])('401 for %s, nothing stored', async (_name, header) => {
    const body = JSON.stringify(emailEvent());
    const h = header(body);
    const before = [await events(), await quarantined()];
    const res = await send(pool, { body, headers: h === undefined ? {} : { 'service-signature': h } });
    expect(res.status).toBe(401);
    expect(res.body.error).toBe('invalid_signature');
    expect([await events(), await quarantined()]).toEqual(before);
  });

  it('400 for a signed body that is not JSON; it is kept in quarantine, not stored', async () => {
    const before = await events();
    const res = await deliver(pool, '{"type": "email.sent", ');
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: 'invalid_json', quarantined: true });
    expect(await events()).toBe(before);
    expect(await count(store, 'quarantine', `raw = '{"type": "email.sent", '`)).toBe(1);
  });

  it('400 for a signed body that is not UTF-8: quarantined raw, each such byte as \\xNN, nothing stored altered', async () => {
    const before = await events();
    // The id and the address each hold a byte that is not UTF-8 (\xFF, \xFE) where '#' stands.
    const event = emailEvent('email.bounced', { data: { email_id: 'em_x', to: ['inv-#@example.com'] } });
    const [head = '', middle = '', tail = ''] = JSON.stringify({ ...event, id: 'inv-#' }).split('#');
    const bytes = Buffer.concat([
      Buffer.from(head),
      Buffer.from([0xff]),
      Buffer.from(middle),
      Buffer.from([0xfe]),
      Buffer.from(tail),
    ]);
    const res = await deliver(pool, bytes);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: 'invalid_encoding', quarantined: true });
    expect((await deliver(pool, bytes)).status).toBe(400);
    expect(await events()).toBe(before);
    const { rows } = await store.pool.query<{ raw: string; reason: string }>(
      `SELECT raw, reason FROM "${schema}".quarantine WHERE reason LIKE 'the body is not UTF-8%'`,
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]!.raw).toContain('"id":"inv-\\xFF"');
    expect(rows[0]!.raw).toContain('"inv-\\xFE@example.com"');
    expect(rows[0]!.raw).not.toContain('\ufffd');
  });

  it.each([
    ['an array', '[1,2]'],
    ['a string', '"email.sent"'],
    ['no id', JSON.stringify({ ...emailEvent(), id: undefined })],
    ['an empty id', JSON.stringify({ ...emailEvent(), id: '' })],
    ['a numeric id', JSON.stringify({ ...emailEvent(), id: 7 })],
    ['no type', JSON.stringify({ ...emailEvent(), type: null })],
    ['a created_at that is not ISO', JSON.stringify(emailEvent('email.sent', { created_at: 'yesterday' }))],
    ['30 February', JSON.stringify(emailEvent('email.sent', { created_at: '2024-02-30T00:00:00Z' }))],
    ['year 0', JSON.stringify(emailEvent('email.sent', { created_at: '0000-01-01T00:00:00Z' }))],
    ['data that is an array', JSON.stringify(emailEvent('email.sent', { data: [] }))],
    ['a NUL in the id', JSON.stringify(emailEvent('email.sent', { id: 'evt_\u0000' }))],
    ['a NUL in data', JSON.stringify(emailEvent('email.sent', { data: { x: '\u0000' } }))],
  ])('400 for a signed envelope with %s: quarantined once, not stored', async (_name, body) => {
    const before = await events();
    const q = await quarantined();
    const res = await deliver(pool, body);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: 'not_an_event', quarantined: true });
    // A retry of the same delivery is answered the same and kept once.
    expect((await deliver(pool, body)).status).toBe(400);
    expect(await events()).toBe(before);
    expect(await quarantined()).toBe(q + 1);
  });

  it('413 for a declared Content-Length over the limit, before reading it', async () => {
    const reply = await rawRequest(
      `POST /webhooks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${LIMIT + 1}\r\n` +
        `Service-Signature: ${mayVerify()}\r\n\r\n{"a":`,
    );
    expect(reply).toMatch(/^HTTP\/1\.1 413 /);
    expect(reply.toLowerCase()).toContain('connection: close');
  });

  it('413 for a chunked body that grows past the limit, and nothing stored', async () => {
    const before = await events();
    const chunk = 'x'.repeat(1000);
    const chunks = Array.from({ length: 6 }, () => `${chunk.length.toString(16)}\r\n${chunk}\r\n`).join('');
    const reply = await rawRequest(
      `POST /webhooks HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nService-Signature: ${mayVerify()}\r\n\r\n` +
        `${chunks}0\r\n\r\n`,
    );
    expect(reply).toMatch(/^HTTP\/1\.1 413 /);
    expect(await events()).toBe(before);
  });

  it('413 through an ordinary client too (the answer arrives before a reset)', async () => {
    const res = await send(pool, {
      body: Buffer.alloc(LIMIT * 4, 'a'),
      headers: { 'service-signature': mayVerify() },
    }).catch((err: unknown) => err);
    expect((res as { status?: number }).status).toBe(413);
  });

  it('a body of exactly the limit is read (and judged on its signature)', async () => {
    const res = await send(pool, {
      body: Buffer.alloc(LIMIT, 'a'),
      headers: { 'service-signature': mayVerify() },
    });
    expect(res.status).toBe(401);
  });

  it.each([
    ['GET', '/webhooks', 405],
    ['PUT', '/webhooks', 405],
    ['DELETE', '/webhooks', 405],
    ['POST', '/webhook', 404],
    ['POST', '/', 404],
    ['GET', '/metrics', 404],
    ['POST', '/webhooks/extra', 404],
    ['POST', '/healthz', 405],
  ])('%s %s: %i', async (method, path, status) => {
    const res = await send(pool, method === 'GET' ? { method, path } : { method, path, body: '{}' });
    expect(res.status).toBe(status);
    if (status === 405) expect(res.headers.allow).toBeDefined();
  });

  it('a query string does not change the path', async () => {
    const body = JSON.stringify(emailEvent());
    const res = await send(pool, {
      path: '/webhooks?x=1',
      body,
      headers: { 'service-signature': signWebhookPayload(body, SECRET_NEW) },
    });
    expect(res.status).toBe(200);
  });
});

describe('serve-webhooks: the 300 s tolerance, on an injected clock', () => {
  it.each([
    [-300, 200],
    [300, 200],
    [-301, 401],
    [301, 401],
  ])('t = now %+i s: %i', async (offset, status) => {
    const fixed = 1_750_000_000;
    const svc = await startWebhookService(config, {
      logger: logs.logger,
      port: 0,
      host: '127.0.0.1',
      now: () => fixed,
    });
    const p = poolFor(svc.server.url, 1);
    try {
      expect((await deliver(p, JSON.stringify(emailEvent()), SECRET_NEW, fixed + offset)).status).toBe(
        status,
      );
    } finally {
      await p.close();
      await svc.close();
    }
  });
});

describe('serve-webhooks: health and configuration', () => {
  it('/healthz and /readyz answer 200 with Postgres and the queues up', async () => {
    expect((await send(pool, { method: 'GET', path: '/healthz' })).status).toBe(200);
    const ready = await send(pool, { method: 'GET', path: '/readyz' });
    expect(ready.status).toBe(200);
    const queues = TEST_QUEUE_BACKEND === 'redis' ? { redis: true } : { queues: true };
    expect(ready.body).toEqual({ ok: true, checks: { postgres: true, ...queues } });
  });

  it('with FEED_TYPES, other types are acknowledged and not stored; webhook.test still is', async () => {
    const narrow = await startWebhookService(
      testConfig({ schema, prefix }, { ...env, FEED_TYPES: 'email.sent' }),
      {
        logger: logs.logger,
        port: 0,
        host: '127.0.0.1',
      },
    );
    const p = poolFor(narrow.server.url, 1);
    try {
      const other = emailEvent('contact.subscribed', { data: { email: 'a@example.com' } });
      const res = await deliver(p, JSON.stringify(other));
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ stored: false, ignored: 'type' });
      expect(await count(store, 'events', `id = '${other.id}'`)).toBe(0);
      const test = emailEvent('webhook.test', { data: {} });
      expect((await deliver(p, JSON.stringify(test))).body.stored).toBe(true);
    } finally {
      await p.close();
      await narrow.close();
    }
  });

  it('refuses to start without WEBHOOK_SECRET (exit 2)', async () => {
    await expect(
      startWebhookService(testConfig({ schema, prefix }), { logger: logs.logger, port: 0 }),
    ).rejects.toMatchObject({ exitCode: 2, message: expect.stringContaining('WEBHOOK_SECRET') });
  });

  it('refuses to start on a schema that is not migrated (exit 2)', async () => {
    const empty = uniqueSchema('wh_empty');
    await expect(
      startWebhookService(testConfig({ schema: empty, prefix }, env), { logger: logs.logger, port: 0 }),
    ).rejects.toMatchObject({ exitCode: 2, code: 'SCHEMA_OUTDATED' });
    await dropSchema(empty);
  });
});

describe('serve-webhooks: Postgres unreachable', () => {
  it('starts, answers deliveries 503 with Retry-After, is not ready, and still refuses bad signatures', async () => {
    const down = testConfig(
      { schema, prefix },
      { ...env, DATABASE_URL: 'postgres://postgres@127.0.0.1:1/test' },
    );
    const svc = await startWebhookService(down, { logger: logs.logger, port: 0, host: '127.0.0.1' });
    const p = poolFor(svc.server.url, 2);
    try {
      const res = await deliver(p, JSON.stringify(emailEvent()));
      expect(res.status).toBe(503);
      expect(res.headers['retry-after']).toBe('30');
      // Even a signed non-event: it cannot be quarantined now, so the service must retry.
      expect((await deliver(p, 'not json')).status).toBe(503);
      expect((await send(p, { body: '{}' })).status).toBe(401);
      const ready = await send(p, { method: 'GET', path: '/readyz' });
      expect(ready.status).toBe(503);
      expect(ready.body.checks.postgres).toBe(false);
      expect((await send(p, { method: 'GET', path: '/healthz' })).status).toBe(200);
    } finally {
      await p.close();
      await svc.close();
    }
  });
});

describe('serve-webhooks: shutdown', () => {
  it('close() stops accepting, lets the request in flight finish with 200, then resolves', async () => {
    const svc = await startWebhookService(config, { logger: logs.logger, port: 0, host: '127.0.0.1' });
    const event = emailEvent('email.sent');
    const body = JSON.stringify(event);
    const header = signWebhookPayload(body, SECRET_NEW);
    const socket = connect(svc.server.port, '127.0.0.1');
    let reply = '';
    socket.on('data', (d) => {
      reply += String(d);
    });
    const ended = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.write(
      `POST /webhooks HTTP/1.1\r\nHost: x\r\nService-Signature: ${header}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 10)}`,
    );
    await waitFor(() => svc.server.inFlight() === 1, { what: 'the request in flight' });
    const closed = svc.close();
    // New connections are refused once close() has begun.
    await expect(
      new Promise((resolve, reject) => {
        const s = connect(svc.server.port, '127.0.0.1');
        s.once('connect', () => {
          s.destroy();
          resolve('connected');
        });
        s.once('error', reject);
      }),
    ).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    socket.write(body.slice(10));
    await closed;
    await ended;
    expect(reply).toMatch(/^HTTP\/1\.1 200 /);
    expect(reply.toLowerCase()).toContain('connection: close');
    expect(await count(store, 'events', `id = '${event.id}'`)).toBe(1);
  });
});

describe('serve-webhooks: logs', () => {
  it('never hold a secret, a signature or the database password', () => {
    const text = logs.text();
    expect(text).toContain('webhook signature rejected');
    for (const secret of [SECRET_OLD, SECRET_NEW]) expect(text).not.toContain(secret);
    expect(text).not.toMatch(/v1=[0-9a-f]{64}/);
  });
});

function now(): number {
  return Math.floor(Date.now() / 1000);
}

/** Writes raw bytes to the receiver and resolves with everything it answered once it closes. */
function rawRequest(text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(service.server.port, '127.0.0.1');
    let reply = '';
    socket.on('data', (d) => {
      reply += String(d);
    });
    socket.on('error', (err) => (reply ? resolve(reply) : reject(err)));
    socket.on('close', () => resolve(reply));
    socket.on('connect', () => socket.write(text));
    socket.setTimeout(10_000, () => socket.destroy());
  });
}
