import { isIP } from 'node:net';
import { deliveryRoutes } from './api-routes.js';
import type { SimContext } from './context.js';
import { badRequest } from './errors.js';
import { mergeFaults } from './faults.js';
import { readJsonObject, stringField } from './json-body.js';
import { type Route, route } from './router.js';

export const CONTACT_EVENT_TYPES = ['contact.subscribed', 'contact.unsubscribed'] as const;
export type ContactEventType = (typeof CONTACT_EVENT_TYPES)[number];

/** True for an address of this machine: 127.0.0.0/8, ::1, and their IPv4-mapped IPv6 forms. */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : address;
  if (isIP(v4) === 4) return v4.startsWith('127.');
  return address === '::1' || address === '0:0:0:0:0:0:0:1';
}

/** Checks a contact event request; throws 400. */
export function checkContact(type: unknown, email: unknown): { type: ContactEventType; email: string } {
  if (!CONTACT_EVENT_TYPES.includes(type as ContactEventType)) {
    throw badRequest('invalid_field', `"type" must be one of ${CONTACT_EVENT_TYPES.join(', ')}`);
  }
  if (typeof email !== 'string' || !/^[^@\s]+@[^@\s]+$/.test(email)) {
    throw badRequest('invalid_field', '"email" must be an email address');
  }
  return { type: type as ContactEventType, email };
}

/** The `/_sim` control API: stats, fault knobs, backlog, contact events, deliveries. Loopback only. */
export function controlRoutes(ctx: SimContext): Route[] {
  return [
    route('GET', '/_sim/stats', 'control', () => ({ status: 200, body: ctx.snapshot() })),

    route('GET', '/_sim/faults', 'control', () => ({ status: 200, body: ctx.faults })),

    route('POST', '/_sim/faults', 'control', async ({ req }) => {
      ctx.faults = mergeFaults(ctx.faults, await readJsonObject(req, { requireJson: false }));
      return { status: 200, body: ctx.faults };
    }),

    route('POST', '/_sim/backlog', 'control', async ({ req }) => {
      const body = await readJsonObject(req, { requireJson: false });
      if (body.count === undefined) throw badRequest('missing_field', '"count" is required');
      ctx.log.setBacklog(body.count as number);
      return { status: 200, body: { count: ctx.log.backlogSize, events: ctx.log.size } };
    }),

    route('POST', '/_sim/contacts', 'control', async ({ req }) => {
      const body = await readJsonObject(req, { requireJson: false });
      const { type, email } = checkContact(stringField(body, 'type'), stringField(body, 'email'));
      return { status: 200, body: ctx.emitContactEvent(type, email) };
    }),

    ...deliveryRoutes(ctx, '/_sim', 'control'),
  ];
}
