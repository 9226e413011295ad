import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { ConfigError } from '../errors.js';
import { checkBaseUrl } from './base-url.js';
import { CONFIG_DEFAULTS } from './config-defaults.js';
import type { Config, Env } from './config-type.js';
import { checkUrl } from './connection-url.js';
import { queueSettings } from './consumer-settings.js';
import { deepFreeze } from './deep-freeze.js';
import { parseEventTypes } from './event-types.js';
import { fields, parseFields, VARIABLES } from './fields.js';
import { readMaxPerSecond, readRateShare } from './request-budget.js';
import { loadSourcesFile, sourceNameProblem } from './sources-file.js';
import { parseTracing } from './tracing-settings.js';
import { unknownVariables, warnOnce } from './unknown-variables.js';

/** The warnings for this environment and the config loaded from it: variables that look like feedsync's and are not. */
export function variableWarnings(env: Env, config: Config): string[] {
  const keys = config.sources.flatMap((s) => (s.apiKey ? [s.apiKey] : []));
  return unknownVariables(env, VARIABLES, keys);
}

/**
 * Parses the environment into a frozen Config, or throws a ConfigError naming the
 * first variable that is wrong. `readFile` is injectable for tests. With `keys: false`
 * the key files of FEED_SOURCES_FILE are not read (their entries get no key): for a
 * command that never calls the service, which would otherwise read one file a source.
 * A variable that looks like one of feedsync's and is not (`QUEUE_PREFX`) is warned of,
 * once per process, through `warn` (default: a process warning).
 */
export function loadConfig(
  env: Env = process.env,
  readFile = (p: string) => readFileSync(p, 'utf8'),
  opts: { keys?: boolean; warn?: (warning: string) => void } = {},
): Config {
  const { raw, values: v } = parseFields(fields, env, readFile);

  if (v.FEED_BASE_URL !== undefined) {
    const problem = checkBaseUrl(v.FEED_BASE_URL);
    if (problem) throw new ConfigError(`FEED_BASE_URL: ${problem}`);
  }
  checkUrl('DATABASE_URL', v.DATABASE_URL, ['postgres:', 'postgresql:']);
  // A stuck statement must fail its turn, and so give the lease back, before the lease runs out.
  const statementTimeoutMs =
    v.DATABASE_STATEMENT_TIMEOUT_MS ??
    Math.min(CONFIG_DEFAULTS.DATABASE_STATEMENT_TIMEOUT_MS, v.SOURCE_LEASE_MS - 1);
  if (statementTimeoutMs >= v.SOURCE_LEASE_MS)
    throw new ConfigError(
      `DATABASE_STATEMENT_TIMEOUT_MS: must be below SOURCE_LEASE_MS (${v.SOURCE_LEASE_MS}), so that a stuck statement lets its lease go`,
    );
  const { redis, queues } = queueSettings(v);

  const sourceProblem = sourceNameProblem(v.FEED_SOURCE);
  if (sourceProblem) throw new ConfigError(`FEED_SOURCE: ${sourceProblem}`);
  const types = parseTypes(v.FEED_TYPES);
  const rateShare =
    named('FEED_RATE_SHARE', v.FEED_RATE_SHARE, readRateShare) ?? CONFIG_DEFAULTS.FEED_RATE_SHARE;
  const maxRequestsPerSecond = named(
    'FEED_MAX_REQUESTS_PER_SECOND',
    v.FEED_MAX_REQUESTS_PER_SECOND,
    readMaxPerSecond,
  );
  const baseUrl = v.FEED_BASE_URL?.replace(/\/+$/, '') ?? null;
  const apiKey = v.FEED_API_KEY ?? null;
  const sources =
    v.FEED_SOURCES_FILE === undefined
      ? [{ source: v.FEED_SOURCE, baseUrl, apiKey, keyProblem: null, types }]
      : loadSourcesFile(
          v.FEED_SOURCES_FILE,
          { baseUrl, apiKey, types },
          { env, readFile, parseTypes: parseEventTypes, readKeyFiles: opts.keys ?? true },
        );

  const config: Config = {
    sources,
    sourcesFile: v.FEED_SOURCES_FILE ?? null,
    syncConcurrency: v.SYNC_CONCURRENCY,
    sourceLeaseMs: v.SOURCE_LEASE_MS,
    hostName: (v.HOSTNAME ?? hostname()).slice(0, 63),
    feed: {
      baseUrl,
      apiKey,
      source: v.FEED_SOURCE,
      types,
      pageLimit: v.FEED_PAGE_LIMIT,
      listField: v.FEED_LIST_FIELD ?? null,
      maxRetryWaitMs: v.FEED_MAX_RETRY_WAIT_MS,
      maxRetries: v.FEED_MAX_RETRIES,
      rateShare,
      maxRequestsPerSecond,
      timeoutMs: v.FEED_TIMEOUT_MS,
      maxResponseBytes: v.FEED_MAX_RESPONSE_BYTES,
    },
    database: {
      url: v.DATABASE_URL,
      schema: v.DATABASE_SCHEMA,
      connectTimeoutMs: v.DATABASE_CONNECT_TIMEOUT_MS,
      statementTimeoutMs,
    },
    redis,
    queues: {
      ...queues,
      jobAttempts: v.JOB_ATTEMPTS,
      jobBackoffMs: v.JOB_BACKOFF_MS,
    },
    eventsRetentionDays: v.EVENTS_RETENTION_DAYS ?? null,
    syncIntervalMs: v.SYNC_INTERVAL_MS,
    syncOnceMaxMs: v.SYNC_ONCE_MAX_MS,
    metricsPort: v.METRICS_PORT,
    metricsHost: unbracket(v.METRICS_HOST),
    pushgatewayUrl: v.PUSHGATEWAY_URL ?? null,
    logLevel: v.LOG_LEVEL,
    webhooks: {
      secrets: (v.WEBHOOK_SECRET ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
      port: v.WEBHOOK_PORT,
      host: unbracket(v.WEBHOOK_HOST),
      maxBodyBytes: v.WEBHOOK_MAX_BODY_BYTES,
      scheme: v.WEBHOOK_SCHEME,
    },
    tracing: parseTracing(env),
    given: Object.keys(raw).filter((name) => raw[name] !== undefined),
  };
  warnOnce(variableWarnings(env, config), opts.warn);
  return deepFreeze(config);
}

/** A variable read by `read` when set, its complaint named after it (exit 2). */
function named<T>(name: string, value: string | undefined, read: (value: string) => T): T | null {
  if (value === undefined) return null;
  try {
    return read(value);
  } catch (err) {
    throw new ConfigError(`${name}: ${(err as Error).message}`);
  }
}

function parseTypes(value: string | undefined): readonly string[] | null {
  if (value === undefined) return null;
  try {
    return parseEventTypes(value.split(','));
  } catch (err) {
    throw new ConfigError(`FEED_TYPES: ${(err as Error).message}`);
  }
}

/** `[::1]` as the address listen() takes. */
function unbracket(value: string): string {
  return value.startsWith('[') && value.endsWith(']') ? value.slice(1, -1) : value;
}
