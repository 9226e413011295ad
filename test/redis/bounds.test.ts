import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRedisSettings, type RedisSettings } from '../../src/config/redis-settings.js';
import { RedisError } from '../../src/errors.js';
import { createRedisPublisher } from '../../src/queue/redis-publisher.js';
import { connectRedis } from '../../src/redis/connect.js';
import { planWait } from '../../src/redis/replicas.js';
import { deletePrefix, TEST_JOB_OPTIONS, TEST_REDIS_URL, uniquePrefix } from '../support/redis.js';

const prefix = uniquePrefix('bounds');
/** Accepts connections and never answers: a server that hangs, or a half-open connection. */
let silent: Server;
let silentPort: number;
const sockets = new Set<Socket>();

beforeAll(async () => {
  silent = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  silentPort = (silent.address() as { port: number }).port;
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise((resolve) => silent.close(resolve));
  await deletePrefix(prefix);
});

const JOB = [{ name: 'email.sent', jobId: 'bounds/1', data: { id: '1' } }];

function publisherOn(redis: RedisSettings, timeoutMs = 300) {
  return createRedisPublisher({ redis, prefix, jobOptions: TEST_JOB_OPTIONS, timeoutMs });
}

describe('every Redis call is bounded', () => {
  it('a server that never answers: the connection fails with REDIS_TIMEOUT, and close returns', async () => {
    const publisher = publisherOn(parseRedisSettings({ REDIS_URL: `redis://127.0.0.1:${silentPort}` }));
    try {
      const err = await publisher.addBulk('q', JOB).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RedisError);
      expect(err).toMatchObject({
        code: 'REDIS_TIMEOUT',
        message: 'Redis: connecting did not finish within 300 ms',
      });
      expect(await publisher.ping()).toBe(false);
    } finally {
      await publisher.close();
    }
  }, 30_000);

  it('Sentinels that never answer: the connection fails within its bound', async () => {
    const settings = parseRedisSettings({
      REDIS_URL: TEST_REDIS_URL,
      REDIS_SENTINELS: `127.0.0.1:${silentPort}`,
      REDIS_SENTINEL_NAME: 'mymaster',
    });
    await expect(connectRedis(settings, { timeoutMs: 300 })).rejects.toBeInstanceOf(Error);
    const publisher = publisherOn(settings);
    try {
      await expect(publisher.addBulk('q', JOB)).rejects.toBeInstanceOf(RedisError);
    } finally {
      await publisher.close();
    }
  }, 30_000);
});

describe('stopping (the first SIGTERM)', () => {
  it('after a failed call, no connection is made again; a working connection keeps serving', async () => {
    const stopping = new AbortController();
    const broken = createRedisPublisher({
      redis: parseRedisSettings({ REDIS_URL: `redis://127.0.0.1:${silentPort}` }),
      prefix,
      jobOptions: TEST_JOB_OPTIONS,
      timeoutMs: 300,
      stopping: stopping.signal,
    });
    const healthy = createRedisPublisher({
      redis: parseRedisSettings({ REDIS_URL: TEST_REDIS_URL }),
      prefix,
      jobOptions: TEST_JOB_OPTIONS,
      stopping: stopping.signal,
    });
    try {
      await expect(broken.addBulk('q', JOB)).rejects.toMatchObject({ code: 'REDIS_TIMEOUT' });
      await healthy.addBulk('q', JOB);
      stopping.abort();
      const connectsBefore = sockets.size;
      await expect(broken.addBulk('q', JOB)).rejects.toMatchObject({ code: 'REDIS_STOPPING' });
      expect(sockets.size).toBe(connectsBefore);
      await healthy.addBulk('q', JOB);
      expect(await healthy.counts('q')).toMatchObject({ waiting: 1 });
    } finally {
      await broken.close();
      await healthy.close();
    }
  }, 30_000);
});

describe('REDIS_WAIT_REPLICAS', () => {
  it('unset on a lone server: 0, with the reason', async () => {
    const connection = await connectRedis(parseRedisSettings({ REDIS_URL: TEST_REDIS_URL }), {
      timeoutMs: 5000,
    });
    try {
      const plan = await planWait(connection, null, prefix);
      expect(plan).toMatchObject({ replicas: 0, configured: false, connectedReplicas: 0, slot: null });
      expect(plan.why).toContain('the server has 0 replicas');
      expect((await planWait(connection, 2, prefix)).why).toContain('set by REDIS_WAIT_REPLICAS');
    } finally {
      connection.disconnect();
    }
  });

  it('set to 1 on a server without a replica: the batch is not counted as published (REDIS_NOT_REPLICATED)', async () => {
    const publisher = publisherOn(
      parseRedisSettings({ REDIS_URL: TEST_REDIS_URL, REDIS_WAIT_REPLICAS: 1 }),
      400,
    );
    try {
      await expect(publisher.addBulk('q', JOB)).rejects.toMatchObject({
        code: 'REDIS_NOT_REPLICATED',
        message: 'Redis: 0 of the 1 replicas (REDIS_WAIT_REPLICAS) acknowledged the jobs within 200 ms',
      });
    } finally {
      await publisher.close();
    }
  });
});
