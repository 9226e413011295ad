import { composeParts, type Parts } from '../compose/parts.js';
import type { Config } from '../config/config-type.js';
import { ConfigError, listenFailure } from '../errors.js';
import { type Logger, loggerFor } from '../logger.js';
import { createWebhookMetrics, type WebhookMetrics } from '../metrics/webhook-metrics.js';
import type { Publisher } from '../queue/publisher.js';
import type { Relay } from '../queue/relay.js';
import { routeFor } from '../queue/routes.js';
import { createApplier } from '../store/applier.js';
import { noPostgresThere } from '../store/bounded-client.js';
import type { Store } from '../store/db.js';
import { pingPostgres } from '../store/health.js';
import { type RetentionLoop, startRetentionLoop } from '../store/retention-loop.js';
import { createDeliveryHandler, type DeliveryHandler } from './receiver.js';
import { type ReceiverServer, type ReceiverServerOptions, startReceiverServer } from './receiver-server.js';
import { type SchemaGate, schemaGate } from './schema-gate.js';
import { type WebhookScheme, webhookScheme } from './webhook-scheme.js';

export interface WebhookServiceOptions {
  /** Default: a logger at the config's LOG_LEVEL that scrubs its secrets (`loggerFor(config)`). */
  logger?: Logger;
  /** Overrides WEBHOOK_PORT (tests pass 0). */
  port?: number;
  /** Overrides WEBHOOK_HOST, the interface to listen on. */
  host?: string;
  /** Replaces the store and publisher made from the config; the caller then closes them. */
  store?: Store;
  publisher?: Publisher;
  /** Now, in unix seconds, for the signature's tolerance. Default the system clock. */
  now?: () => number;
  /** How long close() waits for the relay to publish what the last deliveries stored. Default 5000 ms. */
  drainTimeoutMs?: number;
  /** The relay's sweep of the outbox when nothing kicks it, in ms (tests set it past their own length). Default: RELAY_DEFAULTS.sweepMs. */
  relaySweepMs?: number;
  /** Between two rounds of pruning (EVENTS_RETENTION_DAYS, OUTBOX_RETENTION_HOURS). Default 5 minutes. */
  retentionIntervalMs?: number;
}

export interface WebhookService {
  readonly server: ReceiverServer;
  readonly store: Store;
  readonly relay: Relay;
  /** The receiver's Prometheus metrics; `serve-webhooks` serves them on METRICS_PORT. */
  readonly metrics: WebhookMetrics;
  /** Stops accepting, finishes requests in flight, publishes what it can, stops the relay, closes. */
  close(): Promise<void>;
}

/**
 * `feedsync serve-webhooks` without the signals: the receiver, its store and its
 * own outbox relay (webhook events reach BullMQ without waiting for a sync run).
 * Refuses to start without WEBHOOK_SECRET or with an outdated schema (exit 2), or when
 * nothing that speaks Postgres answers at DATABASE_URL within its connect timeout
 * (exit 1). It starts while Postgres refuses connections (down, restarting):
 * deliveries are answered 503 and /readyz fails until Postgres answers.
 */
export async function startWebhookService(
  config: Config,
  opts: WebhookServiceOptions = {},
): Promise<WebhookService> {
  if (config.webhooks.secrets.length === 0) {
    throw new ConfigError('WEBHOOK_SECRET: required for serve-webhooks (or WEBHOOK_SECRET_FILE)');
  }
  // A secret that is no key of the scheme stops the start here, before anything is opened.
  const scheme = webhookScheme(config.webhooks.scheme, config.webhooks.secrets);
  const logger = opts.logger ?? loggerFor(config);
  const log = logger.child({ module: 'serve-webhooks' });
  const metrics = createWebhookMetrics(config.feed.source, [
    config.queues.emailEvents,
    config.queues.contactEvents,
  ]);
  const parts = webhookParts(config, logger, metrics, opts);
  const gate = await checkedGate(parts, log);
  const { store, relay } = parts;
  // Rows a previous run stored but did not publish.
  if (gate.current) relay.kick();

  const service: ServiceParts = { config, opts, logger, log, metrics, parts, gate, scheme };
  const at = {
    portVar: 'WEBHOOK_PORT',
    hostVar: 'WEBHOOK_HOST',
    host: opts.host ?? config.webhooks.host,
    port: opts.port ?? config.webhooks.port,
  };
  const receiver = receiverOptions(service, deliveryHandler(service), at);
  let server: ReceiverServer;
  try {
    server = await startReceiverServer(receiver);
  } catch (err) {
    await parts.close();
    throw listenFailure(err, at);
  }
  // A receive-only deployment has no sync run to prune after: storage stays bounded all the same.
  const retention = startRetentionLoop({
    store,
    logger,
    days: config.eventsRetentionDays,
    outboxHours: config.queues.outboxRetentionHours,
    ...(opts.retentionIntervalMs ? { intervalMs: opts.retentionIntervalMs } : {}),
  });
  log.info(
    {
      host: at.host,
      port: server.port,
      source: config.feed.source,
      secretCount: config.webhooks.secrets.length,
      scheme: scheme.name,
    },
    'receiving webhooks at POST /webhooks',
  );

  let closing: Promise<void> | undefined;
  return {
    server,
    store,
    relay,
    metrics,
    close() {
      closing ??= shutDown(service, server, retention);
      return closing;
    },
  };
}

/** What the service is made of once its schema was checked: its receiver and its close use them. */
interface ServiceParts {
  config: Config;
  opts: WebhookServiceOptions;
  logger: Logger;
  log: Logger;
  metrics: WebhookMetrics;
  parts: Parts;
  gate: SchemaGate;
  scheme: WebhookScheme;
}

/** The store, publisher and relay of the receiver, made on first use. */
function webhookParts(
  config: Config,
  logger: Logger,
  metrics: WebhookMetrics,
  opts: WebhookServiceOptions,
): Parts {
  return composeParts(
    config,
    logger,
    {
      // Deliveries come in parallel; a few more connections than a sync run needs.
      poolMax: 8,
      applicationName: 'feedsync-webhooks',
      relay: {
        onPublished: metrics.onPublished,
        onPublishDelay: metrics.onPublishDelay,
        ...(opts.relaySweepMs === undefined ? {} : { sweepMs: opts.relaySweepMs }),
      },
    },
    // A store or publisher given stays the caller's to close.
    opts,
  );
}

/** Checks the schema once at start; only a Postgres that refuses connections lets the service start unchecked. */
async function checkedGate(parts: Parts, log: Logger): Promise<SchemaGate> {
  const gate = schemaGate(parts.store);
  try {
    await gate.ensure();
  } catch (err) {
    // A refusal (Postgres restarting) is answered 503 until it is back; an address where
    // nothing answers, or something else does, would hold every delivery for the whole
    // connect timeout: that stops the command, as it stops every other.
    if (err instanceof ConfigError || noPostgresThere(err)) {
      await parts.close();
      throw err;
    }
    log.warn({ err }, 'Postgres does not answer yet; deliveries get 503 until it does');
  }
  return gate;
}

/** Verifies, stores and hands on each delivery, its commits timed. */
function deliveryHandler({
  config,
  opts,
  logger,
  metrics,
  parts,
  gate,
  scheme,
}: ServiceParts): DeliveryHandler {
  const { relay } = parts;
  return createDeliveryHandler({
    secrets: config.webhooks.secrets,
    scheme,
    source: config.feed.source,
    applier: metrics.timeCommits(createApplier(parts.store, routeFor(config.queues))),
    types: config.feed.types,
    ready: () => gate.ensure(),
    // A duplicate may be the retry of a delivery whose commit outlived its 503: its row may wait in the outbox.
    onStored: (result) => (result.duplicates > 0 ? relay.kick() : relay.offer(result.outbox)),
    logger,
    ...(opts.now ? { now: opts.now } : {}),
  });
}

/** The HTTP receiver's settings: where it listens, its limits, its probes and metrics. */
function receiverOptions(
  { config, opts, logger, metrics, parts, gate, scheme }: ServiceParts,
  handle: DeliveryHandler,
  at: { host: string; port: number },
): ReceiverServerOptions {
  return {
    port: at.port,
    host: at.host,
    maxBodyBytes: config.webhooks.maxBodyBytes,
    handle: metrics.countRejections(handle),
    headerMayVerify: (headers) => scheme.refusal(headers, opts.now ? { now: opts.now() } : {}) === null,
    onAnswered: metrics.onAnswered,
    onRefused: metrics.onRefused,
    logger,
    ready: async () => {
      const postgres = await gate
        .ensure()
        .then(() => pingPostgres(parts.store.pool))
        .catch(() => false);
      // The queues are reported, not required: deliveries are stored while they are down and published later.
      const queues = await parts.publisher.ping();
      return { ok: postgres, checks: { postgres, [parts.publisher.pings]: queues } };
    },
  };
}

/** WebhookService.close: the receiver first, so the relay drains what the last deliveries stored. */
async function shutDown(
  { opts, log, parts, gate }: ServiceParts,
  server: ReceiverServer,
  retention: RetentionLoop,
): Promise<void> {
  await server.close();
  await retention.stop();
  const drainMs = opts.drainTimeoutMs ?? 5_000;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, drainMs);
  });
  // What is left unpublished stays in the outbox; the next sync run's relay publishes it.
  // Without a schema check that passed, Postgres never answered: nothing was stored to publish.
  if (gate.current) {
    await Promise.race([
      parts.relay.drain().catch((err: unknown) => log.warn({ err }, 'outbox not drained at shutdown')),
      timeout,
    ]);
  }
  clearTimeout(timer);
  await parts.close();
  log.info('webhook receiver stopped');
}
