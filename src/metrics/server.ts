import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';
import { CONFIG_DEFAULTS } from '../config/config-defaults.js';
import { listenFailure } from '../errors.js';
import type { Logger } from '../logger.js';

export interface HealthServerOptions {
  /** METRICS_PORT; 0 picks a free port. */
  port: number;
  /** METRICS_HOST. Default: CONFIG_DEFAULTS.METRICS_HOST, every interface. */
  host?: string;
  /** Prometheus registry served at /metrics; omitted, /metrics is 404. */
  registry?: Registry;
  /** /healthz: the loop's heartbeat is fresh. Omitted, /healthz is 404 (served elsewhere). */
  live?: () => boolean;
  /** /readyz: Postgres and Redis answer. Reports which one does not. Omitted, /readyz is 404. */
  ready?: () => Promise<{ ok: boolean; checks: Record<string, boolean> }>;
  logger: Logger;
}

/** /healthz, /readyz and /metrics for Kubernetes and Prometheus (each one only when given). */
export async function startHealthServer(
  opts: HealthServerOptions,
): Promise<{ server: Server; port: number; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const reply = (status: number, body: string, type = 'application/json'): void => {
      res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' }).end(body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return reply(405, '{"error":"method not allowed"}');
    if (path === '/healthz' && opts.live) {
      const ok = opts.live();
      return reply(ok ? 200 : 503, JSON.stringify({ ok }));
    }
    if (path === '/readyz' && opts.ready) {
      opts
        .ready()
        .then((r) => reply(r.ok ? 200 : 503, JSON.stringify(r)))
        .catch(() => reply(503, '{"ok":false}'));
      return;
    }
    if (path === '/metrics' && opts.registry) {
      const registry = opts.registry;
      registry
        .metrics()
        .then((text) => reply(200, text, registry.contentType))
        .catch((err: unknown) => {
          opts.logger.warn({ err }, 'metrics collection failed');
          reply(500, '{"error":"metrics collection failed"}');
        });
      return;
    }
    reply(404, '{"error":"not found"}');
  });
  const host = opts.host ?? CONFIG_DEFAULTS.METRICS_HOST;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) =>
      reject(listenFailure(err, { portVar: 'METRICS_PORT', hostVar: 'METRICS_HOST', host, port: opts.port })),
    );
    server.listen(opts.port, host, () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : opts.port;
  return {
    server,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
