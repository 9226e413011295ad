import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ServiceEvent } from '../api/types.js';
import type { Account } from './account.js';
import { apiRoutes } from './api-routes.js';
import { apiKeyPattern, authorize } from './auth.js';
import { SimContext } from './context.js';
import { checkContact, checkControlRequest, controlRoutes } from './control.js';
import { dashboardRoutes } from './dashboard-routes.js';
import { SimError } from './errors.js';
import { chance, mergeFaults, writeFaultyBody } from './faults.js';
import { jsonBytes, sendAsset, sendError, sendJson } from './respond.js';
import { matchRoute, type Route } from './router.js';
import type { Simulator, SimulatorAccount, SimulatorOptions } from './types.js';

/** Starts the simulator and resolves once it listens. */
export async function startSimulator(opts: SimulatorOptions = {}): Promise<Simulator> {
  const defaultKey = checkOptions(opts);
  const ctx = new SimContext({ ...opts, defaultKey });
  const routes = [...apiRoutes(ctx), ...controlRoutes(ctx), ...dashboardRoutes(ctx)];
  const server = createServer((req, res) => void handle(ctx, routes, req, res));

  const host = opts.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 4010, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const origin = `http://${urlHost(host)}:${port}`;
  ctx.logger.info({ origin }, 'simulator listening');

  let closing: Promise<void> | undefined;
  return {
    baseUrl: `${origin}/api`,
    origin,
    port,
    defaultKey,
    stats: () => ctx.snapshot(),
    setFaults: (f) => {
      ctx.faults = mergeFaults(ctx.faults, f);
    },
    setBacklog: (n) => ctx.accounts.default.log.setBacklog(n),
    account: (key) => {
      if (!ctx.keyPattern.test(key)) throw new RangeError('the simulator does not accept this key');
      return inProcess(ctx, ctx.accounts.forKey(key));
    },
    emitContactEvent: (type, email) => inProcess(ctx, ctx.accounts.default).emitContactEvent(type, email),
    close: () => {
      closing ??= (async () => {
        ctx.timers.clear();
        await ctx.deliverer.close();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          // Idle keep-alive sockets and hanging feed responses would hold close() open.
          server.closeAllConnections();
        });
      })();
      return closing;
    },
  };
}

/** The in-process handle on one account. */
function inProcess(ctx: SimContext, account: Account): SimulatorAccount {
  return {
    id: account.id,
    stats: () => ctx.snapshot().accounts[account.id]!,
    setBacklog: (n) => account.log.setBacklog(n),
    setFaults: (f) => void account.setFaults(ctx.faults, f),
    emitContactEvent: (type, email): ServiceEvent => {
      const contact = checkContact(type, email);
      return account.emit(contact.type, { email: contact.email });
    },
  };
}

async function handle(
  ctx: SimContext,
  routes: readonly Route[],
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const started = Date.now();
  const method = req.method ?? 'GET';
  const url = requestUrl(req.url);
  const path = url.pathname;
  let name = 'unmatched';
  let account: Account | null = null;
  res.on('close', () => {
    ctx.logger.debug(
      { method, path, route: name, account: account?.id, status: res.statusCode, ms: Date.now() - started },
      'request',
    );
  });

  try {
    const match = matchRoute(routes, method, path);
    if (match && 'route' in match) name = `${match.route.method} ${match.route.path}`;

    if (path === '/api' || path.startsWith('/api/')) {
      const key = authorize(req.headers.authorization, ctx.keyPattern);
      account = typeof key === 'string' ? ctx.accounts.forKey(key) : null;
      const faults = account?.faults(ctx.faults) ?? ctx.faults;
      await ctx.timers.sleep(faults.latencyMs);
      if (typeof key !== 'string') throw key;
      if (ctx.rateLimit && account) {
        const budget = ctx.rateLimit.admit(account.id);
        for (const [header, value] of Object.entries(budget.headers)) res.setHeader(header, value);
        if (!budget.ok) {
          ctx.stats.rateLimited(account.id);
          throw new SimError(429, 'rate_limited', "the account's request budget is spent", budget.headers);
        }
      }
      const { rate429, rate5xx, retryAfterSec } = faults;
      if (chance(rate429, ctx.random)) {
        throw new SimError(429, 'rate_limited', 'too many requests', {
          'retry-after': String(retryAfterSec),
        });
      }
      if (chance(rate5xx, ctx.random)) throw new SimError(503, 'service_unavailable', 'try again later');
    } else if (path === '/_sim' || path.startsWith('/_sim/') || (match && 'route' in match)) {
      // What is left is the control API and the dashboard.
      checkControlRequest(req, ctx.trustNetwork);
    }

    if (match === null) throw new SimError(404, 'not_found', `no route for ${method} ${path.slice(0, 200)}`);
    if ('allowed' in match) {
      throw new SimError(405, 'method_not_allowed', `${method} is not allowed here`, {
        allow: match.allowed.join(', '),
      });
    }

    const routeAccount = account ?? ctx.accounts.default;
    const reply = await match.route.handle({ req, url, params: match.params, account: routeAccount });
    ctx.stats.request(account?.id ?? null, name, reply.status);
    if (account && method !== 'GET' && reply.status < 300) account.lastActivityAt = ctx.now();
    if (reply.asset) {
      sendAsset(res, reply.asset);
    } else if (match.route.feedBody && reply.status === 200) {
      const { slowBodyMs, hangRate, truncateRate } = routeAccount.faults(ctx.faults);
      const hang = chance(hangRate, ctx.random);
      const truncate = !hang && chance(truncateRate, ctx.random);
      writeFaultyBody(res, jsonBytes(reply.body), { slowMs: slowBodyMs, hang, truncate }, ctx.timers);
    } else {
      sendJson(res, reply.status, reply.body, reply.headers);
    }
  } catch (err) {
    const refusal = err instanceof SimError ? err : new SimError(500, 'internal_error', 'unexpected error');
    if (!(err instanceof SimError)) ctx.logger.error({ err, method, path }, 'simulator error');
    ctx.stats.request(account?.id ?? null, name, refusal.status);
    if (res.headersSent) res.destroy();
    else sendError(res, refusal);
  }
}

/** Throws a RangeError for a bad option; answers the default account's key. */
function checkOptions(opts: SimulatorOptions): string {
  const port = opts.port ?? 4010;
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new RangeError('port must be 0 to 65535');
  const scale = opts.timeScale ?? 1;
  if (!Number.isFinite(scale) || scale < 0) throw new RangeError('timeScale must be a number >= 0');
  if (opts.keyPrefix !== undefined && !/^[a-z]+$/.test(opts.keyPrefix)) {
    throw new RangeError('keyPrefix must be lowercase letters');
  }
  const defaultKey = opts.defaultKey ?? `${opts.keyPrefix ?? 'sim'}_test_local`;
  if (!apiKeyPattern(opts.keyPrefix).test(defaultKey)) {
    throw new RangeError(
      'defaultKey must be a key the simulator accepts (<prefix>_test_… or <prefix>_live_…)',
    );
  }
  return defaultKey;
}

function requestUrl(target: string | undefined): URL {
  try {
    return new URL(`http://simulator${target?.startsWith('/') ? target : '/'}`);
  } catch {
    return new URL('http://simulator/');
  }
}

/** The host to put in URLs: a wildcard address is reached through loopback; IPv6 goes in brackets. */
function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}
