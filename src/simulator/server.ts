import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ServiceEvent } from '../api/types.js';
import { apiRoutes } from './api-routes.js';
import { apiKeyPattern, checkAuthorization } from './auth.js';
import { SimContext } from './context.js';
import { checkContact, controlRoutes, isLoopbackAddress } from './control.js';
import { SimError } from './errors.js';
import { chance, mergeFaults, writeFaultyBody } from './faults.js';
import { jsonBytes, sendError, sendJson } from './respond.js';
import { matchRoute, type Route } from './router.js';
import type { Simulator, SimulatorOptions } from './types.js';

/** Starts the simulator and resolves once it listens. */
export async function startSimulator(opts: SimulatorOptions = {}): Promise<Simulator> {
  checkOptions(opts);
  const ctx = new SimContext(opts);
  const routes = [...apiRoutes(ctx), ...controlRoutes(ctx)];
  const keyPattern = apiKeyPattern(opts.keyPrefix);
  const server = createServer((req, res) => void handle(ctx, routes, keyPattern, req, res));

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
    stats: () => ctx.snapshot(),
    setFaults: (f) => {
      ctx.faults = mergeFaults(ctx.faults, f);
    },
    setBacklog: (n) => ctx.log.setBacklog(n),
    emitContactEvent: (type, email): ServiceEvent => {
      const contact = checkContact(type, email);
      return ctx.emitContactEvent(contact.type, contact.email);
    },
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

async function handle(
  ctx: SimContext,
  routes: readonly Route[],
  keyPattern: RegExp,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const started = Date.now();
  const method = req.method ?? 'GET';
  const url = requestUrl(req.url);
  const path = url.pathname;
  let name = 'unmatched';
  res.on('close', () => {
    ctx.logger.debug(
      { method, path, route: name, status: res.statusCode, ms: Date.now() - started },
      'request',
    );
  });

  try {
    const match = matchRoute(routes, method, path);
    if (match && 'route' in match) name = `${match.route.method} ${match.route.path}`;

    if (path === '/api' || path.startsWith('/api/')) {
      await ctx.timers.sleep(ctx.faults.latencyMs);
      checkAuthorization(req.headers.authorization, keyPattern);
      const { rate429, rate5xx, retryAfterSec } = ctx.faults;
      if (chance(rate429, ctx.random)) {
        throw new SimError(429, 'rate_limited', 'too many requests', {
          'retry-after': String(retryAfterSec),
        });
      }
      if (chance(rate5xx, ctx.random)) throw new SimError(503, 'service_unavailable', 'try again later');
    } else if (
      (path === '/_sim' || path.startsWith('/_sim/')) &&
      !isLoopbackAddress(req.socket.remoteAddress)
    ) {
      throw new SimError(403, 'forbidden', 'the control API answers loopback clients only');
    }

    if (match === null) throw new SimError(404, 'not_found', `no route for ${method} ${path.slice(0, 200)}`);
    if ('allowed' in match) {
      throw new SimError(405, 'method_not_allowed', `${method} is not allowed here`, {
        allow: match.allowed.join(', '),
      });
    }

    const reply = await match.route.handle({ req, url, params: match.params });
    ctx.stats.request(name, reply.status);
    if (match.route.feedBody && reply.status === 200) {
      const { slowBodyMs, hangRate, truncateRate } = ctx.faults;
      const hang = chance(hangRate, ctx.random);
      const truncate = !hang && chance(truncateRate, ctx.random);
      writeFaultyBody(res, jsonBytes(reply.body), { slowMs: slowBodyMs, hang, truncate }, ctx.timers);
    } else {
      sendJson(res, reply.status, reply.body, reply.headers);
    }
  } catch (err) {
    const refusal = err instanceof SimError ? err : new SimError(500, 'internal_error', 'unexpected error');
    if (!(err instanceof SimError)) ctx.logger.error({ err, method, path }, 'simulator error');
    ctx.stats.request(name, refusal.status);
    if (res.headersSent) res.destroy();
    else sendError(res, refusal);
  }
}

function checkOptions(opts: SimulatorOptions): void {
  const port = opts.port ?? 4010;
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new RangeError('port must be 0 to 65535');
  const scale = opts.timeScale ?? 1;
  if (!Number.isFinite(scale) || scale < 0) throw new RangeError('timeScale must be a number >= 0');
  if (opts.keyPrefix !== undefined && !/^[a-z]+$/.test(opts.keyPrefix)) {
    throw new RangeError('keyPrefix must be lowercase letters');
  }
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
