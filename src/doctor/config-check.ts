import { queueStoreFor } from '../compose/queue-store.js';
import { loadConfig, variableWarnings } from '../config/config.js';
import type { Config } from '../config/config-type.js';
import { keyKindOf } from '../config/key-kind.js';
import { redactUrl } from '../logger.js';
import { type Check, check } from './report.js';

type Setting = [name: string, read: (c: Config) => unknown, kind?: 'secret' | 'url'];

const SETTINGS: readonly Setting[] = [
  ['FEED_BASE_URL', (c) => c.feed.baseUrl],
  ['FEED_API_KEY', (c) => c.feed.apiKey, 'secret'],
  ['FEED_SOURCE', (c) => c.feed.source],
  ['FEED_TYPES', (c) => c.feed.types?.join(',') ?? null],
  ['FEED_PAGE_LIMIT', (c) => c.feed.pageLimit],
  ['FEED_LIST_FIELD', (c) => c.feed.listField],
  ['FEED_MAX_RETRY_WAIT_MS', (c) => c.feed.maxRetryWaitMs],
  ['FEED_MAX_RETRIES', (c) => c.feed.maxRetries],
  ['FEED_TIMEOUT_MS', (c) => c.feed.timeoutMs],
  ['FEED_MAX_RESPONSE_BYTES', (c) => c.feed.maxResponseBytes],
  ['DATABASE_URL', (c) => c.database.url, 'url'],
  ['DATABASE_SCHEMA', (c) => c.database.schema],
  ['REDIS_URL', (c) => c.redis.url, 'url'],
  ['REDIS_CLUSTER', (c) => c.redis.cluster],
  // Host and port only: an entry given as a URL may hold the Sentinels' password.
  ['REDIS_SENTINELS', (c) => c.redis.sentinel?.nodes.map((n) => `${n.host}:${n.port}`).join(',') ?? null],
  ['REDIS_SENTINEL_NAME', (c) => c.redis.sentinel?.name ?? null],
  ['REDIS_WAIT_REPLICAS', (c) => c.redis.waitReplicas],
  ['QUEUE_BACKEND', (c) => c.queues.backend],
  ['QUEUE_PREFIX', (c) => c.queues.prefix],
  ['QUEUE_EMAIL_EVENTS', (c) => c.queues.emailEvents],
  ['QUEUE_CONTACT_EVENTS', (c) => c.queues.contactEvents],
  ['OUTBOX_RETENTION_HOURS', (c) => c.queues.outboxRetentionHours],
  ['JOB_ATTEMPTS', (c) => c.queues.jobAttempts],
  ['JOB_BACKOFF_MS', (c) => c.queues.jobBackoffMs],
  ['EVENTS_RETENTION_DAYS', (c) => c.eventsRetentionDays],
  ['SYNC_INTERVAL_MS', (c) => c.syncIntervalMs],
  ['SOURCE_LEASE_MS', (c) => c.sourceLeaseMs],
  ['METRICS_PORT', (c) => c.metricsPort],
  ['PUSHGATEWAY_URL', (c) => c.pushgatewayUrl, 'url'],
  ['LOG_LEVEL', (c) => c.logLevel],
  ['WEBHOOK_SECRET', (c) => (c.webhooks.secrets.length > 0 ? c.webhooks.secrets : null), 'secret'],
  ['WEBHOOK_PORT', (c) => c.webhooks.port],
  ['WEBHOOK_MAX_BODY_BYTES', (c) => c.webhooks.maxBodyBytes],
];

/**
 * Loads the configuration and says which settings differ from their defaults.
 * Secrets show only that they are set; URLs show without their password.
 */
export function checkConfig(
  load: () => Config,
  env?: Record<string, string | undefined>,
): { config: Config | null; check: Check } {
  let config: Config;
  try {
    config = load();
  } catch (err) {
    return {
      config: null,
      check: check(
        'config',
        'fail',
        (err as Error).message,
        'correct the variable named above (see docs/DEPLOYMENT.md, Configuration)',
      ),
    };
  }
  const warnings = [...(env ? variableWarnings(env, config) : []), ...portClashes(config)];
  if (warnings.length > 0) {
    return {
      config,
      check: check(
        'config',
        'warn',
        `${warnings.join('; ')}; ${describeConfig(config)}`,
        'rename a misspelt variable (it leaves its default in place) or unset it; give each listener a port of its own',
      ),
    };
  }
  return { config, check: check('config', 'ok', describeConfig(config)) };
}

/**
 * Two listeners of one process on one port: serve-webhooks listens on WEBHOOK_PORT and
 * METRICS_PORT, and the second listen would fail. Port 0 (any free port) never clashes.
 */
export function portClashes(config: Config): string[] {
  const port = config.webhooks.port;
  if (port === 0 || port !== config.metricsPort) return [];
  return [
    `METRICS_PORT and WEBHOOK_PORT are both ${port}: serve-webhooks listens on each, so they must differ`,
  ];
}

/** `NAME=value` for every setting that is not at its default; secrets as `NAME set`. */
function describeConfig(config: Config): string {
  const defaults = loadConfig({});
  const queueStore = queueStoreFor(config);
  const parts: string[] = [];
  for (const [name, read, kind] of SETTINGS) {
    const value = read(config);
    if (JSON.stringify(value) === JSON.stringify(read(defaults))) continue;
    if (kind === 'secret') {
      const count = Array.isArray(value) ? value.length : 1;
      parts.push(`${name} set${count > 1 ? ` (${count} values)` : ''}${keyKind(name, value)}`);
    } else if (kind === 'url' && typeof value === 'string') {
      parts.push(`${name}=${redactUrl(value)}${queueStore.unusedNote(name)}`);
    } else {
      parts.push(`${name}=${String(value)}${queueStore.unusedNote(name)}`);
    }
  }
  return parts.length > 0
    ? `loaded; set: ${parts.join(', ')}; the rest at their defaults`
    : 'loaded; every setting at its default';
}

/** A test or live key, which says which account is in use without showing the key. */
function keyKind(name: string, value: unknown): string {
  if (name !== 'FEED_API_KEY' || typeof value !== 'string') return '';
  const kind = keyKindOf(value);
  return kind === null ? '' : ` (a ${kind} key)`;
}
