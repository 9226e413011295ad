import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonText } from '../../src/feed/json-text.js';
import type { ApplyResult } from '../../src/store/applier.js';
import { createApplier } from '../../src/store/applier.js';
import { createDeliveryHandler } from '../../src/webhooks/receiver.js';
import { signWebhookPayload } from '../../src/webhooks/signature.js';
import { route } from '../store/migrated-store.js';
import { testConfig } from '../support/config.js';
import { addRefusingTrigger, nested } from '../support/poison-items.js';
import { uniqueSchema } from '../support/postgres.js';
import { waitFor } from '../support/processes.js';
import { uniquePrefix } from '../support/redis.js';
import {
  captureLogger,
  count,
  deliver,
  emailEvent,
  jobIds,
  SECRET_NEW,
  startTestReceiver,
  type TestReceiver,
} from './helpers.js';

const schema = uniqueSchema('wh_poison');
const prefix = uniquePrefix('wh-poison');
const config = testConfig({ schema, prefix }, { WEBHOOK_SECRET: SECRET_NEW });
const logs = captureLogger();
let rx: TestReceiver;

beforeAll(async () => {
  rx = await startTestReceiver(config, logs.logger, { connections: 4, schema, prefix });
  await addRefusingTrigger(rx.store.pool, schema);
});
afterAll(() => rx?.close());

const stored = (id: string) => count(rx.store, 'events', `id = '${id}'`);
const quarantined = () => count(rx.store, 'quarantine');

describe('serve-webhooks: what can never be stored is answered 400 and quarantined, once', () => {
  it.each([
    [
      'a created_at offset of 24 hours',
      emailEvent('email.sent', { created_at: '2024-05-01T10:00:00+24:00' }),
    ],
    ['offset minutes of 60', emailEvent('email.sent', { created_at: '2024-05-01T10:00:00+01:60' })],
    ['an email_id of 3,000 characters', emailEvent('email.sent', { data: { email_id: 'e'.repeat(3_000) } })],
    ['data nested 5,000 deep', emailEvent('email.sent', { data: { email_id: 'em', x: nested(5_000) } })],
    ['a value Postgres refuses (22023)', emailEvent('email.sent', { data: { refuse: '22023' } })],
    ['a value past a Postgres limit (54001)', emailEvent('email.sent', { data: { refuse: '54001' } })],
    ['a check Postgres enforces (23514)', emailEvent('email.sent', { data: { refuse: '23514' } })],
  ])('%s', async (_name, event) => {
    const body = jsonText(event);
    const before = await quarantined();
    const res = await deliver(rx.pool, body);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: 'not_an_event', quarantined: true });
    // The service's retry of the same delivery: the same answer, kept once.
    expect((await deliver(rx.pool, body)).status).toBe(400);
    expect(await stored(event.id)).toBe(0);
    expect(await quarantined()).toBe(before + 1);
  });

  it('keeps the body of a refused envelope as it came, and the reason Postgres gave', async () => {
    const event = emailEvent('email.sent', { data: { refuse: '22007' } });
    const res = await deliver(rx.pool, JSON.stringify(event));
    expect(res.body.message).toMatch(/SQLSTATE 22007/);
    const { rows } = await rx.store.pool.query(
      `SELECT raw, reason FROM "${schema}".quarantine WHERE raw LIKE $1`,
      [`%${event.id}%`],
    );
    expect(rows).toEqual([
      {
        raw: JSON.stringify(event),
        reason: expect.stringMatching(/^the database refused it \(SQLSTATE 22007\)/),
      },
    ]);
  });

  it('stores valid RFC 3339 forms as their UTC instant: offsets up to 23:59, a leap second, lowercase t and z', async () => {
    for (const [createdAt, instant] of [
      ['2024-05-01T10:00:00+16:00', '2024-04-30T18:00:00.000Z'],
      ['2016-12-31T23:59:60Z', '2017-01-01T00:00:00.000Z'],
      ['2024-05-01t10:00:00z', '2024-05-01T10:00:00.000Z'],
    ]) {
      const event = emailEvent('email.delivered', { created_at: createdAt });
      expect((await deliver(rx.pool, JSON.stringify(event))).status).toBe(200);
      const { rows } = await rx.store.pool.query<{ created_at: Date }>(
        `SELECT created_at FROM "${schema}".events WHERE id = $1`,
        [event.id],
      );
      expect(rows[0]?.created_at.toISOString()).toBe(instant);
    }
  });
});

describe('serve-webhooks: 503 only where a retry can help', () => {
  it.each(['40001', '40P01', '57014', '53300'])(
    'SQLSTATE %s: 503 with Retry-After, nothing stored or quarantined',
    async (code) => {
      const event = emailEvent('email.sent', { data: { email_id: `em_${code}`, refuse: code } });
      const before = await quarantined();
      const res = await deliver(rx.pool, JSON.stringify(event));
      expect(res.status).toBe(503);
      expect(res.headers['retry-after']).toBe('30');
      expect(res.body.error).toBe('store_unavailable');
      expect(await quarantined()).toBe(before);
      expect(await stored(event.id)).toBe(0);
    },
  );
});

describe('serve-webhooks: the relay after a late commit', () => {
  it('a duplicate kicks the relay: a row stored after its 503 went out is published on the retry', async () => {
    const event = emailEvent('email.bounced');
    // Earlier deliveries' kicks are spent first. A drain settles once what was committed before
    // it is published, possibly mid-way through a busy outbox; a second one, with nothing left,
    // settles on an empty batch, after which the relay sleeps until kicked.
    await rx.service.relay.drain();
    await rx.service.relay.drain();
    // The commit of a delivery that was answered 503: stored, with nobody left to kick the relay.
    await createApplier(rx.store, route).apply({
      source: config.feed.source,
      receivedVia: 'webhook',
      events: [event],
      quarantine: [],
    });
    expect(await count(rx.store, 'outbox', `event_id = '${event.id}' AND published_at IS NULL`)).toBe(1);
    const res = await deliver(rx.pool, JSON.stringify(event));
    expect(res).toMatchObject({ status: 200, body: { stored: true, duplicate: true } });
    // The job reaches Redis before the relay's transaction marks its row: wait for the mark.
    await waitFor(
      async () =>
        (await count(rx.store, 'outbox', `event_id = '${event.id}' AND published_at IS NULL`)) === 0,
      { what: 'the outbox row of the retried event marked published' },
    );
    expect(await jobIds(prefix, 'email-events')).toContain(`default/${event.id}`);
  });

  it('the handler calls the kick for a duplicate as for a new event, never for a refusal', async () => {
    const kicks: ApplyResult[] = [];
    const handle = createDeliveryHandler({
      secrets: [SECRET_NEW],
      source: 'kick',
      applier: createApplier(rx.store, route),
      onStored: (result) => kicks.push(result),
      logger: logs.logger,
    });
    const signed = (body: string) =>
      handle(Buffer.from(body), { 'service-signature': signWebhookPayload(body, SECRET_NEW) });
    const event = JSON.stringify(emailEvent('email.sent'));
    expect((await signed(event)).status).toBe(200);
    expect((await signed(event)).status).toBe(200);
    expect(kicks.map((k) => k.inserted.length)).toEqual([1, 0]);
    expect(
      (await signed(JSON.stringify(emailEvent('email.sent', { data: { refuse: '22023' } })))).status,
    ).toBe(400);
    expect(kicks).toHaveLength(2);
  });
});
