import { afterAll, describe, expect, it } from 'vitest';
import { testEnv } from '../support/config.js';
import { freePort, killChildren, type RedisServer, runCli, startRedisServer } from '../support/processes.js';
import { expectNoRedisArguments, FAILED_RUN_LOG_BOUND } from '../support/redis-logs.js';
import { command } from '../support/redis-topologies.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import { outboxBacklogOf, type Sandbox, storedCount, useSandboxes } from '../sync/harness.js';

const BACKLOG = 300;
const PASSWORD = 'redis-pass-0f9e8d7c';
const sim = useSimulator({ backlog: BACKLOG });
const servers: RedisServer[] = [];
// The private servers are gone after the file: no keys to delete.
const sandbox = useSandboxes({ redisUrl: () => null });
afterAll(async () => {
  await killChildren();
  for (const server of servers) await server.dispose();
});

/** `sync --once` at LOG_LEVEL=trace against a Redis that fails; everything it printed. */
async function failedRun(box: Sandbox, redisUrl: string): Promise<{ code: number | null; log: string }> {
  const env = {
    PATH: process.env.PATH ?? '',
    ...testEnv(
      { schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl },
      { REDIS_URL: redisUrl, LOG_LEVEL: 'trace' },
    ),
  };
  const res = await runCli(['sync', '--once'], env, 60_000);
  return { code: res.code, log: `${res.stdout}${res.stderr}` };
}

/** Each case runs the CLI a few times against real servers; a slow, busy machine takes its time. */
const CLI_TEST_TIMEOUT_MS = 120_000;

describe.concurrent('Redis errors in the log, at LOG_LEVEL=trace', () => {
  it(
    'a Redis that refuses every write (NOREPLICAS): message, code and command only',
    async () => {
      const box = await sandbox('log_refuses');
      const redis = await startRedisServer({ args: ['--min-replicas-to-write', '1'] });
      servers.push(redis);
      // Set once it runs: the start-up probe speaks without a password.
      await command(redis.port, ['CONFIG', 'SET', 'requirepass', PASSWORD]);
      const { code, log } = await failedRun(box, `redis://:${PASSWORD}@127.0.0.1:${redis.port}`);
      expect(code).toBe(1);
      expect(log).toMatch(/"redisCode":"NOREPLICAS"/);
      // BullMQ falls back from EVALSHA to EVAL, whose arguments hold the whole Lua script.
      expect(log).toMatch(/"command":"eval(sha)?"/);
      expect(log).toContain('the outbox could not be drained');
      // One word for it: nothing says it drained.
      expect(log).not.toContain('"drained":true');
      expect(log).toMatch(/"drained":false[^\n]*sync run finished/);
      expectNoRedisArguments(log, [PASSWORD, TEST_API_KEY]);
      expect(log.length).toBeLessThan(FAILED_RUN_LOG_BOUND);
      expect(await storedCount(box.store)).toBe(BACKLOG);
      expect(await outboxBacklogOf(box.store)).toBeGreaterThan(0);
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'a dead Redis: the connection error, no more',
    async () => {
      const box = await sandbox('log_dead');
      const { code, log } = await failedRun(box, `redis://:${PASSWORD}@127.0.0.1:${await freePort()}`);
      expect(code).toBe(1);
      expect(log).toMatch(/"redisCode":"ECONNREFUSED"/);
      expect(log).not.toContain('"drained":true');
      expect(log).toMatch(/"drained":false[^\n]*sync run finished/);
      expectNoRedisArguments(log, [PASSWORD, TEST_API_KEY]);
      expect(log.length).toBeLessThan(FAILED_RUN_LOG_BOUND);
      expect(await storedCount(box.store)).toBe(BACKLOG);
    },
    CLI_TEST_TIMEOUT_MS,
  );
});
