import { randomBytes } from 'node:crypto';
import type { SimContext } from './context.js';
import { parseSendRequest } from './emails.js';
import { chance } from './faults.js';
import { parseFeedQuery, readPage } from './feed.js';
import { readJsonObject } from './json-body.js';
import { type Route, type RouteRequest, route } from './router.js';
import { parseCreateWebhook, publicView, type Registration } from './webhooks.js';

/**
 * The service's endpoints under `/api`, each on the account of the request's key.
 * Deliveries are listed and resent here too, as real services do.
 */
export function apiRoutes(ctx: SimContext): Route[] {
  return [
    route('POST', '/api/emails', 'api', async ({ req, account }) => {
      const request = parseSendRequest(await readJsonObject(req, { requireJson: true }));
      const key = req.headers['idempotency-key'];
      const { id, replayed } = account.emails.send(request, Array.isArray(key) ? key[0] : key);
      return { status: 200, body: { id }, headers: replayed ? { 'idempotent-replayed': 'true' } : {} };
    }),

    route(
      'GET',
      '/api/events',
      'api',
      ({ url, account }) => {
        const query = parseFeedQuery(url.searchParams, account.log);
        const duplicate = chance(account.faults(ctx.faults).duplicateRate, ctx.random);
        return { status: 200, body: readPage(account.log, query, duplicate) };
      },
      { feedBody: true },
    ),

    route('POST', '/api/webhooks', 'api', async ({ req, account }) => {
      const input = parseCreateWebhook(await readJsonObject(req, { requireJson: true }));
      return { status: 200, body: account.webhooks.create(input) };
    }),

    route('GET', '/api/webhooks', 'api', ({ account }) => ({
      status: 200,
      body: { data: account.webhooks.list() },
    })),

    route('GET', '/api/webhooks/:id', 'api', ({ params, account }) => ({
      status: 200,
      body: publicView(account.webhooks.get(params.id!)),
    })),

    route('DELETE', '/api/webhooks/:id', 'api', ({ params, account }) => {
      account.webhooks.delete(params.id!);
      ctx.deliverer.forget(params.id!);
      return { status: 200, body: { id: params.id, deleted: true } };
    }),

    route('POST', '/api/webhooks/:id/test', 'api', async ({ params, account }) =>
      sendTest(ctx, account.webhooks.get(params.id!)),
    ),

    ...deliveryRoutes(ctx, '/api', 'api', ({ account }, id) => account.webhooks.get(id)),
  ];
}

/** Finds the webhook a delivery route names, or throws 404. */
export type WebhookLookup = (r: RouteRequest, id: string) => Registration;

/**
 * Listing and resending deliveries; mounted under `/api` (the key's own
 * webhooks) and `/_sim` (any account's, loopback only).
 */
export function deliveryRoutes(
  ctx: SimContext,
  base: string,
  scope: Route['scope'],
  lookup: WebhookLookup,
): Route[] {
  return [
    route('GET', `${base}/webhooks/:id/deliveries`, scope, (r) => {
      const reg = lookup(r, r.params.id!);
      return { status: 200, body: { data: ctx.deliverer.list(reg.id) } };
    }),
    route('POST', `${base}/webhooks/:id/deliveries/:delivery/resend`, scope, async (r) => {
      const reg = lookup(r, r.params.id!);
      const { delivery, firstAttempt } = ctx.deliverer.resend(reg.id, r.params.delivery!);
      await firstAttempt;
      return { status: 200, body: latest(ctx, reg.id, delivery.id) };
    }),
  ];
}

/**
 * Posts a `webhook.test` event (not part of the feed) to the endpoint, whatever
 * its `events` filter, and answers once the first attempt is over; failures are
 * retried like any delivery.
 */
export async function sendTest(ctx: SimContext, reg: Registration) {
  const event = {
    type: 'webhook.test',
    id: `evt_test_${randomBytes(8).toString('hex')}`,
    created_at: new Date(ctx.now()).toISOString(),
    data: { webhook_id: reg.id },
  };
  const { delivery, firstAttempt } = ctx.deliverer.deliver(reg, event);
  await firstAttempt;
  return { status: 200, body: { event, delivery: latest(ctx, reg.id, delivery.id) } };
}

function latest(ctx: SimContext, webhookId: string, deliveryId: string) {
  return ctx.deliverer.list(webhookId).find((d) => d.id === deliveryId) ?? null;
}
