import * as z from 'zod/mini';
import { ConfigError } from '../errors.js';
import { CONFIG_DEFAULTS } from './config-defaults.js';
import type { Env } from './config-type.js';
import { MAX_RETENTION_HOURS, MAX_TIMER_MS, SQL_IDENTIFIER } from './limits.js';
import { FILE_VARIANTS, readFileVariants } from './secrets.js';

// zod/mini: the same checks as zod's full API, and the bundle takes only the ones
// used here (the full API costs a run about 70 ms and 7 MB at start-up). Every
// message is our own: the environment holds text, and zod/mini carries no wording.
const int = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z.pipe(
    z.pipe(
      // "-1" is a number, just not one taken here: the words say which are.
      z
        .string()
        .check(
          z.regex(
            /^\d+$/,
            min >= 1 ? 'must be a positive whole number' : 'must be a whole number, 0 or more',
          ),
        ),
      z.transform(Number),
    ),
    z
      .number()
      .check(
        z.minimum(min, `must be at least ${min}`),
        z.maximum(max, max === Number.MAX_SAFE_INTEGER ? 'is too large' : `must be at most ${max}`),
      ),
  );
/** A duration in ms that a timer will wait: at most MAX_TIMER_MS, said so. */
const ms = (min: number) =>
  z.pipe(
    int(min),
    z
      .number()
      .check(
        z.maximum(
          MAX_TIMER_MS,
          `must be at most ${MAX_TIMER_MS} (about 24.8 days, the longest timer Node keeps)`,
        ),
      ),
  );
const oneOf = <const T extends readonly [string, ...string[]]>(values: T) =>
  z.enum(values, `must be one of ${values.join(', ')}`);
const nonEmpty = z.string().check(z.minLength(1, 'must not be empty'));

const identifier = z.string().check(z.regex(SQL_IDENTIFIER, 'must be a lowercase SQL identifier'));
const host = z
  .string()
  .check(
    z.regex(
      /^(\[[0-9a-fA-F:.]+\]|[0-9a-fA-F:.]*:[0-9a-fA-F:.]*|[A-Za-z0-9.-]+)$/,
      'must be an IP address or a host name',
    ),
  );

const queueName = z.string().check(z.regex(/^[^:\s]+$/, 'must be non-empty, without ":" or spaces'));

/** Every variable of the configuration: its check and its default (CONFIG_DEFAULTS). */
export const fields = {
  FEED_BASE_URL: z.optional(z.string()),
  FEED_API_KEY: z.optional(nonEmpty),
  FEED_SOURCE: z._default(
    nonEmpty.check(z.maxLength(200, 'must be at most 200 characters')),
    CONFIG_DEFAULTS.FEED_SOURCE,
  ),
  FEED_TYPES: z.optional(z.string()),
  FEED_PAGE_LIMIT: z._default(int(1, 10_000), CONFIG_DEFAULTS.FEED_PAGE_LIMIT),
  FEED_LIST_FIELD: z.optional(nonEmpty),
  FEED_MAX_RETRY_WAIT_MS: z._default(ms(0), CONFIG_DEFAULTS.FEED_MAX_RETRY_WAIT_MS),
  FEED_MAX_RETRIES: z._default(int(0, 100), CONFIG_DEFAULTS.FEED_MAX_RETRIES),
  FEED_RATE_SHARE: z.optional(z.string()),
  FEED_MAX_REQUESTS_PER_SECOND: z.optional(z.string()),
  FEED_TIMEOUT_MS: z._default(ms(1), CONFIG_DEFAULTS.FEED_TIMEOUT_MS),
  FEED_MAX_RESPONSE_BYTES: z._default(int(1024), CONFIG_DEFAULTS.FEED_MAX_RESPONSE_BYTES),
  DATABASE_URL: z._default(z.string(), CONFIG_DEFAULTS.DATABASE_URL),
  DATABASE_SCHEMA: z._default(identifier, CONFIG_DEFAULTS.DATABASE_SCHEMA),
  DATABASE_CONNECT_TIMEOUT_MS: z._default(int(1, 600_000), CONFIG_DEFAULTS.DATABASE_CONNECT_TIMEOUT_MS),
  DATABASE_STATEMENT_TIMEOUT_MS: z.optional(int(100, 3_600_000)),
  REDIS_URL: z._default(z.string(), CONFIG_DEFAULTS.REDIS_URL),
  REDIS_CLUSTER: z.optional(
    z.pipe(
      z.enum(['true', 'false'], 'must be true or false'),
      z.transform((v) => v === 'true'),
    ),
  ),
  REDIS_SENTINELS: z.optional(z.string()),
  REDIS_SENTINEL_NAME: z.optional(nonEmpty),
  REDIS_WAIT_REPLICAS: z.optional(int(0, 16)),
  QUEUE_BACKEND: z._default(oneOf(['redis', 'postgres']), CONFIG_DEFAULTS.QUEUE_BACKEND),
  QUEUE_DATABASE_URL: z.optional(z.string()),
  QUEUE_PREFIX: z._default(queueName, CONFIG_DEFAULTS.QUEUE_PREFIX),
  QUEUE_EMAIL_EVENTS: z._default(queueName, CONFIG_DEFAULTS.QUEUE_EMAIL_EVENTS),
  QUEUE_CONTACT_EVENTS: z._default(queueName, CONFIG_DEFAULTS.QUEUE_CONTACT_EVENTS),
  OUTBOX_RETENTION_HOURS: z._default(int(0, MAX_RETENTION_HOURS), CONFIG_DEFAULTS.OUTBOX_RETENTION_HOURS),
  JOB_ATTEMPTS: z._default(int(1, 1_000), CONFIG_DEFAULTS.JOB_ATTEMPTS),
  JOB_BACKOFF_MS: z._default(int(0, 86_400_000), CONFIG_DEFAULTS.JOB_BACKOFF_MS),
  EVENTS_RETENTION_DAYS: z.optional(int(1, 36_500)),
  SYNC_INTERVAL_MS: z._default(ms(1), CONFIG_DEFAULTS.SYNC_INTERVAL_MS),
  SYNC_ONCE_MAX_MS: z._default(ms(1), CONFIG_DEFAULTS.SYNC_ONCE_MAX_MS),
  SYNC_CONCURRENCY: z._default(int(1, 256), CONFIG_DEFAULTS.SYNC_CONCURRENCY),
  SOURCE_LEASE_MS: z._default(int(1000, 3_600_000), CONFIG_DEFAULTS.SOURCE_LEASE_MS),
  FEED_SOURCES_FILE: z.optional(z.string()),
  HOSTNAME: z.optional(z.string()),
  METRICS_PORT: z._default(int(0, 65_535), CONFIG_DEFAULTS.METRICS_PORT),
  METRICS_HOST: z._default(host, CONFIG_DEFAULTS.METRICS_HOST),
  PUSHGATEWAY_URL: z.optional(z.url('must be a URL')),
  LOG_LEVEL: z._default(
    oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
    CONFIG_DEFAULTS.LOG_LEVEL,
  ),
  WEBHOOK_SECRET: z.optional(nonEmpty),
  WEBHOOK_PORT: z._default(int(0, 65_535), CONFIG_DEFAULTS.WEBHOOK_PORT),
  WEBHOOK_HOST: z._default(host, CONFIG_DEFAULTS.WEBHOOK_HOST),
  WEBHOOK_MAX_BODY_BYTES: z._default(int(1), CONFIG_DEFAULTS.WEBHOOK_MAX_BODY_BYTES),
  WEBHOOK_SCHEME: z._default(oneOf(['service', 'standard']), CONFIG_DEFAULTS.WEBHOOK_SCHEME),
};

/** Every variable loadConfig reads, `<NAME>_FILE` included: what a misspelt name is told apart from. */
export const VARIABLES: readonly string[] = [
  ...Object.keys(fields),
  ...FILE_VARIANTS.map((n) => `${n}_FILE`),
];

/** The variables of `shape` read from `env` (`<NAME>_FILE` too), checked; or a ConfigError naming the first wrong one. */
export function parseFields<S extends Partial<typeof fields>>(
  shape: S,
  env: Env,
  readFile: (p: string) => string,
): { raw: Env; values: z.infer<z.ZodMiniObject<S>> } {
  const raw: Env = {};
  for (const name of Object.keys(shape)) {
    const value = env[name];
    raw[name] = value === '' ? undefined : value;
  }
  readFileVariants(Object.keys(shape), raw, env, readFile);
  const parsed = z.object(shape).safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const name = String(issue.path[0]);
    // The message names the variable, never its value: it may be a secret.
    throw new ConfigError(`${name}: ${issue.message}`);
  }
  return { raw, values: parsed.data };
}
