import { afterAll } from 'vitest';
import { loadConfig } from '../../../src/config/config.js';
import type { Config } from '../../../src/config/config-type.js';
import { clearPrefix } from '../../../src/queue/clear-prefix.js';
import { migrateQueues } from '../../../src/queue/pg-queues.js';
import { createStore, type Store } from '../../../src/store/db.js';
import { migrate } from '../../../src/store/migrate.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../../support/postgres.js';
import { TEST_QUEUE_BACKEND } from '../../support/queues.js';
import { redisSettings, TEST_REDIS_URL, uniquePrefix } from '../../support/redis.js';
import { TEST_API_KEY } from '../../support/simulator.js';

/** A migrated schema and a BullMQ prefix of one case's own, on the shared or a private server. */
export interface Sandbox {
  schema: string;
  prefix: string;
  store: Store;
  databaseUrl: string;
  redisUrl: string;
  /** With the queues in Postgres (QUEUE_BACKEND=postgres): their database; null with Redis. */
  queueUrl: string | null;
  /** The variables that name the sandbox's queues (REDIS_URL, QUEUE_PREFIX, and QUEUE_BACKEND with Postgres). */
  queueEnv(): Record<string, string>;
  /** The whole environment of a child `feedsync` process on this sandbox (nothing inherited). */
  env(baseUrl: string | null, extra?: Record<string, string>): Record<string, string>;
  /** The configuration of that environment, for a sync or a service run in this process (metrics on a free port). */
  config(baseUrl: string | null, extra?: Record<string, string>): Config;
}

export interface SandboxOptions {
  databaseUrl?: string;
  redisUrl?: string;
  /** Leave the schema empty (the test migrates, or checks an unmigrated one). */
  migrate?: boolean;
  /**
   * The queues in Postgres: in this database (QUEUE_DATABASE_URL), in a schema of the
   * case's own that is the prefix, migrated. null: in Redis, whatever the run. Default:
   * with FEEDSYNC_TEST_QUEUE_BACKEND=postgres (test/support/queues.ts) the sandbox's own
   * database, so a private Postgres carries its own queues; else Redis.
   */
  queueUrl?: string | null;
}

/**
 * Makes sandboxes on demand and drops them all (schemas and Redis keys) in
 * afterAll. A sandbox on a server that is gone by then is skipped quietly.
 */
export function useSandboxes(): (label: string, opts?: SandboxOptions) => Promise<Sandbox> {
  const made: Sandbox[] = [];
  afterAll(async () => {
    for (const box of made) {
      await box.store.close().catch(() => {});
      await dropSchema(box.schema, box.databaseUrl).catch(() => {});
      if (box.queueUrl) await dropSchema(box.prefix, box.queueUrl).catch(() => {});
      else await deleteKeys(box.prefix, box.redisUrl).catch(() => {});
    }
  });
  return async (label, opts = {}) => {
    const schema = uniqueSchema(`f_${label}`);
    const databaseUrl = opts.databaseUrl ?? TEST_DATABASE_URL;
    const redisUrl = opts.redisUrl ?? TEST_REDIS_URL;
    const store = createStore({ url: databaseUrl, schema });
    const queueUrl =
      opts.queueUrl === undefined ? (TEST_QUEUE_BACKEND === 'postgres' ? databaseUrl : null) : opts.queueUrl;
    const prefix = queueUrl ? uniqueSchema(`fq_${label}`) : uniquePrefix(`f-${label.replace(/_/g, '-')}`);
    const queueEnv = (): Record<string, string> => ({
      REDIS_URL: redisUrl,
      QUEUE_PREFIX: prefix,
      ...(queueUrl ? { QUEUE_BACKEND: 'postgres', QUEUE_DATABASE_URL: queueUrl } : {}),
    });
    const env = (baseUrl: string | null, extra: Record<string, string> = {}) => ({
      DATABASE_URL: databaseUrl,
      DATABASE_SCHEMA: schema,
      FEED_API_KEY: TEST_API_KEY,
      LOG_LEVEL: 'warn',
      ...queueEnv(),
      ...(baseUrl ? { FEED_BASE_URL: baseUrl } : {}),
      ...extra,
    });
    const box: Sandbox = {
      schema,
      prefix,
      store,
      databaseUrl,
      redisUrl,
      queueUrl,
      queueEnv,
      env,
      config: (baseUrl, extra = {}) => loadConfig(env(baseUrl, { METRICS_PORT: '0', ...extra })),
    };
    made.push(box);
    if (opts.migrate !== false) await migrate(store);
    if (queueUrl) await migrateQueues({ url: queueUrl, schema: prefix }, 10_000);
    return box;
  };
}

/** Deletes the prefix's keys; quietly does nothing when that Redis is gone (a private one, stopped). */
async function deleteKeys(prefix: string, url: string): Promise<void> {
  await clearPrefix(redisSettings(url), prefix).catch(() => {});
}
