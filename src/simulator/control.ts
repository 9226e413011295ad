import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { CONTACT_EVENT_TYPES, type ContactEventType } from '../event-types.js';
import type { Account } from './account.js';
import { deliveryRoutes } from './api-routes.js';
import type { SimContext } from './context.js';
import { badRequest, SimError } from './errors.js';
import { mergeFaults } from './faults.js';
import { type JsonObject, readJsonObject, stringField } from './json-body.js';
import { type Route, type RouteRequest, route } from './router.js';

/** True for an address of this machine: 127.0.0.0/8, ::1, and their IPv4-mapped IPv6 forms. */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : address;
  if (isIP(v4) === 4) return v4.startsWith('127.');
  return address === '::1' || address === '0:0:0:0:0:0:0:1';
}

/** A host name that can only mean this machine. */
function isLoopbackName(host: string): boolean {
  const name = host.replace(/^\[|\]$/g, '').toLowerCase();
  return name === 'localhost' || name.endsWith('.localhost') || isLoopbackAddress(name);
}

/**
 * Admits a request to the control API or the dashboard: a loopback client (any client
 * when the network is trusted), and, since a browser may be the client, a loopback
 * Host (no DNS rebinding) and no Origin other than a loopback one (no other site's
 * page posting here). A trusted network is for a container whose published port is
 * the host's loopback (Docker Compose): the client is then the bridge's gateway, but
 * the browser still names localhost.
 */
export function checkControlRequest(req: IncomingMessage, trustNetwork = false): void {
  if (!trustNetwork && !isLoopbackAddress(req.socket.remoteAddress)) {
    throw new SimError(
      403,
      'forbidden',
      "the control API answers loopback clients only (the simulator's --trust-network admits others)",
    );
  }
  const host = (req.headers.host ?? '').replace(/:\d+$/, '');
  let origin: string | null = null;
  if (req.headers.origin !== undefined) {
    try {
      origin = new URL(req.headers.origin).hostname;
    } catch {
      origin = '';
    }
  }
  if ((host !== '' && !isLoopbackName(host)) || (origin !== null && !isLoopbackName(origin))) {
    throw new SimError(403, 'forbidden', 'the control API answers pages of this machine only');
  }
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

/**
 * The account a control request names: `key` (an API key) in its JSON body, or
 * `account` (an `acct_…` id) in its body or query; else the default account.
 * Never a key in the query: URLs end up in logs.
 */
function selectAccount(ctx: SimContext, r: RouteRequest, body: JsonObject = {}): Account {
  if (body.key !== undefined) return ctx.accountForKey(stringField(body, 'key'));
  const id = body.account ?? r.url.searchParams.get('account');
  if (id === undefined || id === null || id === '') return r.account;
  if (typeof id !== 'string') throw badRequest('invalid_field', '"account" must be a string');
  return ctx.accounts.byAccountId(id);
}

/** The body without the fields that name an account. */
function withoutAccount(body: JsonObject): JsonObject {
  const { key: _key, account: _account, ...rest } = body;
  return rest;
}

/** The `/_sim` control API: stats, fault knobs, backlog, contact events, deliveries. Loopback only. */
export function controlRoutes(ctx: SimContext): Route[] {
  return [
    route('GET', '/_sim/stats', 'control', () => ({ status: 200, body: ctx.snapshot() })),

    route('GET', '/_sim/faults', 'control', (r) => {
      const named = r.url.searchParams.has('account');
      return { status: 200, body: named ? selectAccount(ctx, r).faults(ctx.faults) : ctx.faults };
    }),

    route('POST', '/_sim/faults', 'control', async (r) => {
      const body = await readJsonObject(r.req, { requireJson: false });
      const patch = withoutAccount(body);
      if (body.key === undefined && body.account === undefined) {
        ctx.faults = mergeFaults(ctx.faults, patch);
        return { status: 200, body: ctx.faults };
      }
      return { status: 200, body: selectAccount(ctx, r, body).setFaults(ctx.faults, patch) };
    }),

    route('POST', '/_sim/backlog', 'control', async (r) => {
      const body = await readJsonObject(r.req, { requireJson: false });
      const account = selectAccount(ctx, r, body);
      if (body.count === undefined) throw badRequest('missing_field', '"count" is required');
      if (body.replace !== undefined && typeof body.replace !== 'boolean') {
        throw badRequest('invalid_field', '"replace" must be true or false');
      }
      // Adding never changes what was served; replacing starts the feed over (benchmarks).
      const before = account.log.size;
      if (body.replace === true) account.log.setBacklog(body.count as number);
      else account.log.addBacklog(body.count as number);
      const events = account.log.size;
      return {
        status: 200,
        body: {
          account: account.id,
          added: body.replace === true ? events : events - before,
          count: account.log.backlogSize,
          events,
        },
      };
    }),

    route('POST', '/_sim/contacts', 'control', async (r) => {
      const body = await readJsonObject(r.req, { requireJson: false });
      const account = selectAccount(ctx, r, body);
      const { type, email } = checkContact(stringField(body, 'type'), stringField(body, 'email'));
      return { status: 200, body: account.emit(type, { email }) };
    }),

    ...deliveryRoutes(ctx, '/_sim', 'control', (_r, id) => ctx.accounts.webhook(id)),
  ];
}
