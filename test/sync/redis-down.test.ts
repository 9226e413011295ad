import { afterAll, describe, expect, it } from 'vitest';
import type { StatusReport } from '../../src/cli/status-report.js';
import { createSync } from '../../src/sync/sync.js';
import { testConfig, testEnv } from '../support/config.js';
import { killChildren, type RedisServer, runCli, startRedisServer } from '../support/processes.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import {
  captureLogger,
  expectExactlyOnce,
  outboxBacklogOf,
  type Sandbox,
  storedCount,
  useSandboxes,
} from './harness.js';

const BACKLOG = 1500;
// Latency keeps the catch-up going for a while after Redis is stopped.
const sim = useSimulator({ backlog: BACKLOG, faults: { latencyMs: 20 } });
// Each case has a Redis of its own, so that the two (each waiting out the relay's backoff) run side by side.
const servers: RedisServer[] = [];
afterAll(async () => {
  await killChildren();
  for (const server of servers) await server.dispose();
});
// The private servers and their data are gone after the file: no keys to delete.
const sandbox = useSandboxes({ redisUrl: () => null });
const logs = captureLogger();

/** A private redis-server, persistent like a production Redis under BullMQ: jobs published before a stop survive it. */
async function privateRedis(): Promise<RedisServer> {
  const server = await startRedisServer({ persist: true });
  servers.push(server);
  return server;
}

function envOf(box: Sandbox, redis: RedisServer): Record<string, string> {
  return testEnv(
    { schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl },
    { REDIS_URL: redis.url },
  );
}

async function status(box: Sandbox, redis: RedisServer): Promise<StatusReport> {
  const res = await runCli(['status', '--json'], envOf(box, redis));
  expect(res.code, res.stderr).toBe(0);
  return JSON.parse(res.stdout) as StatusReport;
}

describe.concurrent('Redis stopped', () => {
  it('in the middle of a run: every event stored, the outbox waits, and drains once Redis is back', async () => {
    const box = await sandbox('redis_mid');
    const redis = await privateRedis();
    const config = testConfig(
      { schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl },
      envOf(box, redis),
    );
    let stopping: Promise<void> | undefined;
    const sync = createSync(config, {
      logger: logs.logger,
      store: box.store,
      hooks: {
        onPublished: () => {
          // Killed, not shut down: it is gone at once, while the catch-up goes on.
          stopping ??= redis.stop('SIGKILL');
        },
      },
    });
    try {
      const result = await sync.runOnce();
      expect(result).toMatchObject({ status: 'caught-up', stored: BACKLOG, drained: false });
    } finally {
      await sync.close();
    }
    expect(stopping, 'Redis was stopped during the run').toBeDefined();
    await stopping;
    expect(await storedCount(box.store)).toBe(BACKLOG);
    const backlog = await outboxBacklogOf(box.store);
    expect(backlog).toBeGreaterThan(0);
    expect(backlog).toBeLessThan(BACKLOG);

    const report = await status(box, redis);
    expect(report.sources).toHaveLength(1);
    expect(report.sources[0]).toMatchObject({
      source: 'default',
      eventsStored: BACKLOG,
      outboxBacklog: backlog,
    });
    expect(report.queues['email-events']).toBeNull();

    await redis.start();
    const again = createSync(config, { logger: logs.logger, store: box.store });
    try {
      expect(await again.runOnce()).toMatchObject({ status: 'caught-up', stored: 0, drained: true });
    } finally {
      await again.close();
    }
    await expectExactlyOnce({ store: box.store, prefix: box.prefix, expected: BACKLOG, redisUrl: redis.url });
    expect(logs.text()).not.toContain(TEST_API_KEY);
  });

  it('before a CLI run: exit 1 with the events stored; the next run after the restart drains', async () => {
    const box = await sandbox('redis_before');
    const redis = await privateRedis();
    await redis.stop();
    const down = await runCli(['sync', '--once'], envOf(box, redis), 30_000);
    expect(down.code, down.stderr).toBe(1);
    expect(down.stdout).toContain('the outbox could not be drained');
    expect(await storedCount(box.store)).toBe(BACKLOG);
    expect(await outboxBacklogOf(box.store)).toBe(BACKLOG);

    await redis.start();
    const up = await runCli(['sync', '--once'], envOf(box, redis));
    expect(up.code, up.stderr).toBe(0);
    await expectExactlyOnce({ store: box.store, prefix: box.prefix, expected: BACKLOG, redisUrl: redis.url });
    expect(sim().stats().emails_sent).toBe(0);
    expect(`${down.stdout}${down.stderr}${up.stdout}${up.stderr}`).not.toContain(TEST_API_KEY);
  });
});
