import { cpus, loadavg, totalmem } from 'node:os';
import { Redis } from 'ioredis';
import { REDIS_URL, withPg } from './env.mjs';

/** What the numbers were measured on. */
export async function describeMachine() {
  const cpu = cpus();
  const postgres = await withPg(async (c) => {
    const { rows } = await c.query(
      `SELECT current_setting('server_version') AS v, current_setting('shared_buffers') AS sb,
        current_setting('synchronous_commit') AS sc`,
    );
    return `PostgreSQL ${rows[0].v} (shared_buffers ${rows[0].sb}, synchronous_commit ${rows[0].sc})`;
  });
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  const info = await redis.info('server');
  redis.disconnect();
  const redisVersion = /redis_version:(\S+)/.exec(info)?.[1] ?? '?';
  return {
    cpu: `${cpu.length} × ${cpu[0]?.model.trim() ?? 'unknown CPU'}`,
    memory: `${Math.round(totalmem() / 2 ** 30)} GiB`,
    node: process.version,
    postgres,
    redis: `Redis ${redisVersion}`,
    loadAtStart: loadavg()
      .map((x) => x.toFixed(2))
      .join(' '),
  };
}

/** The pid of the Redis server (it runs on this machine: loopback only). */
export async function redisPid() {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  try {
    return Number(/process_id:(\d+)/.exec(await redis.info('server'))?.[1]);
  } finally {
    redis.disconnect();
  }
}
