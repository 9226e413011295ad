import { describe, expect, it } from 'vitest';
import { queueStoreFor, queuesInPostgres } from '../../src/compose/queue-store.js';
import { loadConfig } from '../../src/config/config.js';

const redisConfig = loadConfig({ REDIS_URL: 'redis://cache.internal:6380', QUEUE_PREFIX: 'jobs' });
const pgConfig = loadConfig({
  QUEUE_BACKEND: 'postgres',
  QUEUE_DATABASE_URL: 'postgres://app@queues.internal:5433/app',
  QUEUE_PREFIX: 'jobs',
});

describe('the queue store answers for its backend', () => {
  it('names queues, its place and where it is as BullMQ and the demo show them', () => {
    const redis = queueStoreFor(redisConfig);
    const postgres = queueStoreFor(pgConfig);
    expect([redis.queueName('emails'), postgres.queueName('emails')]).toEqual(['jobs:emails', 'jobs.emails']);
    expect([redis.place, postgres.place]).toEqual(['prefix "jobs"', 'schema "jobs"']);
    expect([redis.holder, postgres.holder]).toEqual(['Redis', 'the queues']);
    expect(redis.located).toBe('the queues in the Redis at cache.internal:6380');
    expect(postgres.located).toBe('the queues in Postgres at queues.internal:5433 (QUEUE_BACKEND=postgres)');
    expect([redis.demoPrefix, postgres.demoPrefix]).toEqual(['feedsync-demo', 'feedsync_demo_queues']);
    expect(redis.demoDrops).toBe(
      'deletes the Redis keys that start with "jobs:" in the Redis at cache.internal:6380',
    );
    expect(postgres.demoDrops).toBe(
      "drops the queues' schema jobs in the Postgres at queues.internal:5433 (QUEUE_BACKEND=postgres: no Redis)",
    );
  });

  it('says REDIS_ variables are unused with the queues in Postgres, and picks its own of two', () => {
    const redis = queueStoreFor(redisConfig);
    const postgres = queueStoreFor(pgConfig);
    expect(redis.unusedNote('REDIS_URL')).toBe('');
    expect(postgres.unusedNote('REDIS_URL')).toBe(
      ' (unused: QUEUE_BACKEND=postgres opens no Redis connection)',
    );
    expect(postgres.unusedNote('QUEUE_PREFIX')).toBe('');
    const choices = { redis: 'r', postgres: 'p' };
    expect([redis.pick(choices), postgres.pick(choices)]).toEqual(['r', 'p']);
  });

  it('gives a consumer a pool and QUEUE_BACKEND only with the queues in Postgres', () => {
    const pool = { max: 6, connectTimeoutMs: 5_000, applicationName: 'feedsync-demo-consumer' };
    expect(queueStoreFor(redisConfig).consumerQueues(pool)).toEqual({});
    const inPostgres = queueStoreFor(pgConfig).consumerQueues(pool);
    expect(inPostgres.env).toEqual({
      QUEUE_BACKEND: 'postgres',
      QUEUE_DATABASE_URL: 'postgres://app@queues.internal:5433/app',
    });
    expect(inPostgres.connection).toMatchObject({
      connectionString: 'postgres://app@queues.internal:5433/app',
    });
  });

  it("moves the queues into the demo's own Postgres", () => {
    const moved = queuesInPostgres(redisConfig.queues, 'postgres://postgres@127.0.0.1:5999/postgres');
    expect(moved).toEqual({
      ...redisConfig.queues,
      backend: 'postgres',
      databaseUrl: 'postgres://postgres@127.0.0.1:5999/postgres',
    });
    expect(queueStoreFor({ redis: redisConfig.redis, queues: moved }).queueName('emails')).toBe(
      'jobs.emails',
    );
  });
});
