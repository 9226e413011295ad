import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
let redis: RedisServer;
// Registered before the sandboxes, so that their cleanup runs while this Redis still answers.
beforeAll(async () => {
  // Persistent like a production Redis under BullMQ: jobs published before the stop survive it.
  redis = await startRedisServer({ persist: true });
});
afterAll(async () => {
  await killChildren();
  await redis?.dispose();
});
const sandbox = useSandboxes({ redisUrl: () => redis.url });
const logs = captureLogger();

function envOf(box: Sandbox): Record<string, string> {
  return testEnv(
    { schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl },
    { REDIS_URL: redis.url },
  );
}

async function status(box: Sandbox): Promise<StatusReport> {
  const res = await runCli(['status', '--json'], envOf(box));
  expect(res.code, res.stderr).toBe(0);
  return JSON.parse(res.stdout) as StatusReport;
}

describe('Redis stopped', () => {
  it('in the middle of a run: every event stored, the outbox waits, and drains once Redis is back', async () => {
    const box = await sandbox('redis_mid');
    const config = testConfig({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl }, envOf(box));
    let stopping: Promise<void> | undefined;
    const sync = createSync(config, {
      logger: logs.logger,
      store: box.store,
      hooks: {
        onPublished: () => {
          stopping ??= redis.stop();
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

    const report = await status(box);
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
    await redis.stop();
    const down = await runCli(['sync', '--once'], envOf(box), 30_000);
    expect(down.code, down.stderr).toBe(1);
    expect(down.stdout).toContain('the outbox could not be drained');
    expect(await storedCount(box.store)).toBe(BACKLOG);
    expect(await outboxBacklogOf(box.store)).toBe(BACKLOG);

    await redis.start();
    const up = await runCli(['sync', '--once'], envOf(box));
    expect(up.code, up.stderr).toBe(0);
    await expectExactlyOnce({ store: box.store, prefix: box.prefix, expected: BACKLOG, redisUrl: redis.url });
    expect(sim().stats().emails_sent).toBe(0);
    expect(`${down.stdout}${down.stderr}${up.stdout}${up.stderr}`).not.toContain(TEST_API_KEY);
  });
});
