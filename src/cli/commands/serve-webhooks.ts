import { Command } from 'commander';
import { portClashes } from '../../doctor/config-check.js';
import { ConfigError } from '../../errors.js';
import { startHealthServer } from '../../metrics/server.js';
import { action } from '../context.js';
import { launchedByNpm } from '../launched-by-npm.js';
import { shutdownSignal } from '../shutdown.js';

/** `feedsync serve-webhooks`: the receiver of the service's signed POSTs, until SIGTERM. */
export function serveWebhooksCommand(): Command {
  return new Command('serve-webhooks')
    .description(
      "Receive the service's signed webhooks at POST /webhooks on WEBHOOK_PORT into the same store as the feed; /healthz and /readyz beside it, /metrics on METRICS_PORT.",
    )
    .addHelpText(
      'after',
      '\nNeeds WEBHOOK_SECRET (several, comma-separated, during a rotation) and a migrated schema; not\n' +
        'FEED_BASE_URL or FEED_API_KEY. WEBHOOK_SCHEME=standard verifies Standard Webhooks signatures\n' +
        '(webhook-* or svix-* headers, whsec_ secrets; a body without id takes its webhook-id).\n' +
        'Answers: 200 stored (or already stored), 401 bad signature, 400 not JSON or not an event (kept\n' +
        'in quarantine), 413 body too large, 404/405 wrong path or method, 503 Postgres unavailable (the\n' +
        'service retries). SIGTERM stops accepting, finishes the requests in flight and exits 0.\n' +
        'Exit codes: 0 stopped by a signal, 1 runtime failure, 2 configuration error (no secret, a\n' +
        'secret that is no whsec_ key under WEBHOOK_SCHEME=standard, schema not migrated, METRICS_PORT\n' +
        'equal to WEBHOOK_PORT).',
    )
    .action(
      action(async ({ config, logger }) => {
        const [clash] = portClashes(config);
        if (clash !== undefined) throw new ConfigError(`${clash}; change one of them`, 'PORT_CLASH');
        const { startWebhookService } = await import('../../webhooks/webhook-service.js');
        const shutdown = shutdownSignal(
          logger,
          process.exit,
          'stopping: no new webhooks taken, finishing the requests in flight',
          launchedByNpm(),
        );
        try {
          const service = await startWebhookService(config, { logger });
          // Its own port, so the webhook port (open to the ingress controller) never shows /metrics.
          const metrics = await startHealthServer({
            port: config.metricsPort,
            host: config.metricsHost,
            registry: service.metrics.registry,
            logger,
          }).catch(async (err: unknown) => {
            await service.close();
            throw err;
          });
          logger.child({ module: 'serve-webhooks' }).info({ port: metrics.port }, 'serving /metrics');
          await new Promise<void>((resolve) => {
            if (shutdown.signal.aborted) resolve();
            else shutdown.signal.addEventListener('abort', () => resolve(), { once: true });
          });
          await service.close();
          await metrics.close();
          return 0;
        } finally {
          shutdown.dispose();
        }
      }),
    );
}
