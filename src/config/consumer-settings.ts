import { readFileSync } from 'node:fs';
import { ConfigError } from '../errors.js';
import type { Config, Env, QueueBackend } from './config-type.js';
import { checkUrl } from './connection-url.js';
import { deepFreeze } from './deep-freeze.js';
import { fields, parseFields } from './fields.js';
import { SQL_IDENTIFIER } from './limits.js';
import {
  hashTagOf,
  missingHashTagError,
  parseRedisSettings,
  type RedisEnv,
  type RedisSettings,
} from './redis-settings.js';

/**
 * What a consumer (`feedsync/consumer`) reads of the environment: the queues'
 * Redis and names, and how long feedsync may hand an event over again, with the
 * worker's names, defaults and checks, so that both ends agree.
 */
export interface ConsumerSettings {
  readonly redis: RedisSettings;
  readonly queues: Pick<
    Config['queues'],
    'backend' | 'databaseUrl' | 'prefix' | 'emailEvents' | 'contactEvents' | 'outboxRetentionHours'
  >;
  readonly logLevel: Config['logLevel'];
}

/**
 * Parses the consumer's variables (REDIS_*, QUEUE_*, DATABASE_URL as QUEUE_DATABASE_URL's
 * default, OUTBOX_RETENTION_HOURS, LOG_LEVEL) when a consumer is created.
 */
export function loadConsumerSettings(
  env: Env = process.env,
  readFile = (p: string) => readFileSync(p, 'utf8'),
): ConsumerSettings {
  const { values: v } = parseFields(
    {
      REDIS_URL: fields.REDIS_URL,
      REDIS_CLUSTER: fields.REDIS_CLUSTER,
      REDIS_SENTINELS: fields.REDIS_SENTINELS,
      REDIS_SENTINEL_NAME: fields.REDIS_SENTINEL_NAME,
      REDIS_WAIT_REPLICAS: fields.REDIS_WAIT_REPLICAS,
      DATABASE_URL: fields.DATABASE_URL,
      QUEUE_BACKEND: fields.QUEUE_BACKEND,
      QUEUE_DATABASE_URL: fields.QUEUE_DATABASE_URL,
      QUEUE_PREFIX: fields.QUEUE_PREFIX,
      QUEUE_EMAIL_EVENTS: fields.QUEUE_EMAIL_EVENTS,
      QUEUE_CONTACT_EVENTS: fields.QUEUE_CONTACT_EVENTS,
      OUTBOX_RETENTION_HOURS: fields.OUTBOX_RETENTION_HOURS,
      LOG_LEVEL: fields.LOG_LEVEL,
    },
    env,
    readFile,
  );
  return deepFreeze({ ...queueSettings(v), logLevel: v.LOG_LEVEL });
}

/**
 * The queues' store and names, read alike by the worker and a consumer. A forced
 * cluster is checked for a hash tag in the prefix now; a detected one when feedsync
 * first connects. In Postgres the prefix names a schema, so it must be an identifier.
 */
export function queueSettings(
  v: RedisEnv & {
    DATABASE_URL: string;
    QUEUE_BACKEND: QueueBackend;
    QUEUE_DATABASE_URL?: string | undefined;
    QUEUE_PREFIX: string;
    QUEUE_EMAIL_EVENTS: string;
    QUEUE_CONTACT_EVENTS: string;
    OUTBOX_RETENTION_HOURS: number;
  },
): Pick<ConsumerSettings, 'redis' | 'queues'> {
  const redis = parseRedisSettings(v);
  const databaseUrl = v.QUEUE_DATABASE_URL ?? v.DATABASE_URL;
  if (v.QUEUE_BACKEND === 'postgres') {
    checkUrl(v.QUEUE_DATABASE_URL === undefined ? 'DATABASE_URL' : 'QUEUE_DATABASE_URL', databaseUrl, [
      'postgres:',
      'postgresql:',
    ]);
    if (!SQL_IDENTIFIER.test(v.QUEUE_PREFIX)) {
      throw new ConfigError(
        "QUEUE_PREFIX: with QUEUE_BACKEND=postgres it names the queues' schema: must be a lowercase SQL identifier",
      );
    }
  } else if (redis.cluster === true && hashTagOf(v.QUEUE_PREFIX) === null) {
    throw missingHashTagError(v.QUEUE_PREFIX);
  }
  return {
    redis,
    queues: {
      backend: v.QUEUE_BACKEND,
      databaseUrl,
      prefix: v.QUEUE_PREFIX,
      emailEvents: v.QUEUE_EMAIL_EVENTS,
      contactEvents: v.QUEUE_CONTACT_EVENTS,
      outboxRetentionHours: v.OUTBOX_RETENTION_HOURS,
    },
  };
}
