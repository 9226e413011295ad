import { randomBytes } from 'node:crypto';
import type { SimContext } from './context.js';
import { parseSendRequest } from './emails.js';
import { chance } from './faults.js';
import { parseFeedQuery, readPage } from './feed.js';
import { readJsonObject } from './json-body.js';
import { type Route, route } from './router.js';
import { parseCreateWebhook } from './webhooks.js';

/** The service's endpoints under `/api`. Deliveries are listed and resent here too, as real services do. */
export function apiRoutes(ctx: SimContext): Route[] {
  return [
    route('POST', '/api/emails', 'api', async ({ req }) => {
      const request = parseSendRequest(await readJsonObject(req, { requireJson: true }));
      const key = req.headers['idempotency-key'];
      const { id, replayed } = ctx.emails.send(request, Array.isArray(key) ? key[0] : key);
      return { status: 200, body: { id }, headers: replayed ? { 'idempotent-replayed': 'true' } : {} };
    }),

    route(
      'GET',
      '/api/events',
      'api',
      ({ url }) => {
        const query = parseFeedQuery(url.searchParams, ctx.log);
        const duplicate = chance(ctx.faults.duplicateRate, ctx.random);
        return { status: 200, body: readPage(ctx.log, query, duplicate) };
      },
      { feedBody: true },
    ),

    route('POST', '/api/webhooks', 'api', async ({ req }) => {
      const input = parseCreateWebhook(await readJsonObject(req, { requireJson: true }));
      return { status: 200, body: ctx.webhooks.create(input) };
    }),

    route('GET', '/api/webhooks', 'api', () => ({ status: 200, body: { data: ctx.webhooks.list() } })),

    route('GET', '/api/webhooks/:id', 'api', ({ params }) => ({
      status: 200,
      body: webhookView(ctx, params.id!),
    })),

    route('DELETE', '/api/webhooks/:id', 'api', ({ params }) => {
      ctx.webhooks.delete(params.id!);
      ctx.deliverer.forget(params.id!);
      return { status: 200, body: { id: params.id, deleted: true } };
    }),

    route('POST', '/api/webhooks/:id/test', 'api', async ({ params }) => sendTest(ctx, params.id!)),

    ...deliveryRoutes(ctx, '/api', 'api'),
  ];
}

/** Listing and resending deliveries; mounted under `/api` (with a key) and `/_sim` (loopback). */
export function deliveryRoutes(ctx: SimContext, base: string, scope: Route['scope']): Route[] {
  return [
    route('GET', `${base}/webhooks/:id/deliveries`, scope, ({ params }) => {
      ctx.webhooks.get(params.id!);
      return { status: 200, body: { data: ctx.deliverer.list(params.id!) } };
    }),
    route('POST', `${base}/webhooks/:id/deliveries/:delivery/resend`, scope, async ({ params }) => {
      ctx.webhooks.get(params.id!);
      const { delivery, firstAttempt } = ctx.deliverer.resend(params.id!, params.delivery!);
      await firstAttempt;
      return { status: 200, body: latest(ctx, params.id!, delivery.id) };
    }),
  ];
}

function webhookView(ctx: SimContext, id: string) {
  const { signing_secret: _secret, ...view } = ctx.webhooks.get(id);
  return view;
}

/**
 * Posts a `webhook.test` event (not part of the feed) to the endpoint, whatever
 * its `events` filter, and answers once the first attempt is over; failures are
 * retried like any delivery.
 */
async function sendTest(ctx: SimContext, id: string) {
  const reg = ctx.webhooks.get(id);
  const event = {
    type: 'webhook.test',
    id: `evt_test_${randomBytes(8).toString('hex')}`,
    created_at: new Date(ctx.now()).toISOString(),
    data: { webhook_id: reg.id },
  };
  const { delivery, firstAttempt } = ctx.deliverer.deliver(reg, event);
  await firstAttempt;
  return { status: 200, body: { event, delivery: latest(ctx, id, delivery.id) } };
}

function latest(ctx: SimContext, webhookId: string, deliveryId: string) {
  return ctx.deliverer.list(webhookId).find((d) => d.id === deliveryId) ?? null;
}
