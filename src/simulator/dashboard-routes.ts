import { readFileSync } from 'node:fs';
import { sendTest } from './api-routes.js';
import type { SimContext } from './context.js';
import { badRequest } from './errors.js';
import { recordsOf } from './records.js';
import { type Route, route } from './router.js';

/** Feed events the dashboard shows by default, and at most. */
const EVENTS_SHOWN = 50;
const EVENTS_MAX = 500;

/** The page's files, in `dashboard/` beside this module (the build copies them into dist). */
const ASSETS = {
  '/': { file: 'index.html', contentType: 'text/html; charset=utf-8' },
  '/dashboard.js': { file: 'dashboard.js', contentType: 'text/javascript; charset=utf-8' },
  '/dashboard.css': { file: 'dashboard.css', contentType: 'text/css; charset=utf-8' },
  // Browsers ask for /favicon.ico whatever the page links; an SVG answers both.
  '/favicon.svg': { file: 'favicon.svg', contentType: 'image/svg+xml' },
  '/favicon.ico': { file: 'favicon.svg', contentType: 'image/svg+xml' },
} as const;

/**
 * The dashboard at `/`: the service's Webhooks page (registrations, the last 50
 * deliveries with their HTTP status, Resend, Send test), the sent emails, the
 * newest feed events and what feedsync's contact and suppression records will hold,
 * per account; and the small JSON endpoints it reads.
 * Loopback only, like the rest of `/_sim`.
 */
export function dashboardRoutes(ctx: SimContext): Route[] {
  const cache = new Map<string, Buffer>();
  const asset = (file: string): Buffer => {
    let bytes = cache.get(file);
    if (!bytes) {
      bytes = readFileSync(new URL(`./dashboard/${file}`, import.meta.url));
      cache.set(file, bytes);
    }
    return bytes;
  };

  return [
    ...Object.entries(ASSETS).map(([path, { file, contentType }]) =>
      route('GET', path, 'control', () => ({
        status: 200,
        body: null,
        asset: { bytes: asset(file), contentType },
      })),
    ),

    // `now` and `last_activity_at` on the simulator's clock: the page compares them with a
    // choice it remembers, whatever the browser's clock says.
    route('GET', '/_sim/accounts', 'control', () => ({
      status: 200,
      body: {
        now: new Date(ctx.now()).toISOString(),
        data: ctx.accounts.all().map((account) => ({
          id: account.id,
          key_hint: account.keyHint,
          default: account.isDefault,
          events: account.log.size,
          emails_sent: account.emails.count,
          webhooks: account.webhooks.list().length,
          last_activity_at:
            account.lastActivityAt === null ? null : new Date(account.lastActivityAt).toISOString(),
        })),
      },
    })),

    route('GET', '/_sim/accounts/:account/webhooks', 'control', ({ params }) => {
      const account = ctx.accounts.byAccountId(params.account!);
      const data = account.webhooks.list().map((reg) => ({ ...reg, deliveries: ctx.deliverer.list(reg.id) }));
      return { status: 200, body: { data } };
    }),

    route('GET', '/_sim/accounts/:account/emails', 'control', ({ params }) => ({
      status: 200,
      body: { data: ctx.accounts.byAccountId(params.account!).emails.recent() },
    })),

    route('GET', '/_sim/accounts/:account/events', 'control', ({ params, url }) => {
      const account = ctx.accounts.byAccountId(params.account!);
      const limit = url.searchParams.get('limit') ?? String(EVENTS_SHOWN);
      if (!/^\d{1,4}$/.test(limit) || Number(limit) < 1 || Number(limit) > EVENTS_MAX) {
        throw badRequest('invalid_limit', `"limit" must be a whole number from 1 to ${EVENTS_MAX}`);
      }
      return { status: 200, body: { data: account.log.newest(Number(limit)), total: account.log.size } };
    }),

    // What a worker that syncs this account will hold in contact_status and suppressions.
    route('GET', '/_sim/accounts/:account/records', 'control', ({ params }) => ({
      status: 200,
      body: recordsOf(ctx.accounts.byAccountId(params.account!).log.realEvents()),
    })),

    route('POST', '/_sim/webhooks/:id/test', 'control', ({ params }) =>
      sendTest(ctx, ctx.accounts.webhook(params.id!)),
    ),
  ];
}
