import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { parseRedisSettings } from '../../src/config/redis-settings.js';
import { runDoctor } from '../../src/doctor/doctor.js';
import { connectRedis } from '../../src/redis/connect.js';
import { testEnv } from '../support/config.js';
import { CLI, killChildren, spawnNode, waitFor } from '../support/processes.js';
import { TEST_REDIS_URL } from '../support/redis.js';
import { command, type LocalSentinel, startLocalSentinel } from '../support/redis-topologies.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import { expectExactlyOnce, type Sandbox, useSandboxes } from '../sync/harness.js';

// One master, one replica and one Sentinel for the file.
let set: LocalSentinel;
const BACKLOG = 1500;
// Latency keeps the run going while the master fails over.
const sim = useSimulator({ backlog: BACKLOG, faults: { latencyMs: 40 } });
// The servers and their keys are gone after the file: no keys to delete.
const sandbox = useSandboxes({ redisUrl: () => null });

beforeAll(async () => {
  set = await startLocalSentinel('feedsync-test');
}, 60_000);
afterAll(async () => {
  await killChildren();
  await set?.dispose();
});

function envOf(box: Sandbox): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    ...testEnv(
      { schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl },
      {
        REDIS_SENTINELS: `127.0.0.1:${set.sentinel.port}`,
        REDIS_SENTINEL_NAME: set.name,
        // REDIS_WAIT_REPLICAS unset: under Sentinel a batch counts as published once the replica holds it.
      },
    ),
  };
}

async function published(box: Sandbox): Promise<number> {
  const { rows } = await box.store.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${box.schema}".outbox WHERE published_at IS NOT NULL`,
  );
  return rows[0]!.n;
}

describe('Redis Sentinel', () => {
  it('a master failover during sync --once: every job on the new master, none lost, none twice', async () => {
    const box = await sandbox('sentinel_failover');
    const before = await set.masterPort();
    const env = envOf(box);
    const run = spawnNode([CLI, 'sync', '--once', '--migrate'], env);
    await waitFor(async () => (await published(box)) > 0, {
      timeoutMs: 60_000,
      what: 'the first jobs published',
    });
    await command(set.sentinel.port, ['SENTINEL', 'FAILOVER', set.name]);
    const after = await waitFor(async () => ((await set.masterPort()) !== before ? set.masterPort() : null), {
      timeoutMs: 30_000,
      what: 'the Sentinel to name a new master',
    });
    const first = await run.waitExit(90_000);
    // Exit 1 only when the failover outlasted the relay's retries; the next run drains what is left.
    if (first.code !== 0) {
      expect(first.code, first.stderr).toBe(1);
      const second = await spawnNode([CLI, 'sync', '--once'], env).waitExit(90_000);
      expect(second.code, second.stderr).toBe(0);
    }
    await expectExactlyOnce({
      store: box.store,
      prefix: box.prefix,
      expected: BACKLOG,
      redisUrl: `redis://127.0.0.1:${after}`,
    });
    expect(`${first.stdout}${first.stderr}`).not.toContain(TEST_API_KEY);
  }, 240_000);

  it('a master name the Sentinels do not know: the connection fails, naming REDIS_SENTINEL_NAME', async () => {
    const settings = parseRedisSettings({
      REDIS_URL: TEST_REDIS_URL,
      REDIS_SENTINELS: `127.0.0.1:${set.sentinel.port}`,
      REDIS_SENTINEL_NAME: 'no-such-master',
    });
    await expect(connectRedis(settings, { timeoutMs: 5000 })).rejects.toMatchObject({
      code: 'REDIS_NO_MASTER',
      message: expect.stringMatching(
        /^Redis: no Sentinel of REDIS_SENTINELS gave the address of the master "no-such-master" \(REDIS_SENTINEL_NAME\) \(the last said: ERR No such master with that name\)$/,
      ),
    });
  }, 60_000);

  it('doctor names the Sentinel mode and the master', async () => {
    // The failover above leaves the old master resyncing as a replica: arrange the replica
    // the check counts, rather than race it.
    await waitFor(
      async () => {
        const info = String(await command(await set.masterPort(), ['INFO', 'replication']));
        return /connected_slaves:[1-9]/.test(info) ? true : null;
      },
      { timeoutMs: 30_000, what: "the master's replica to be connected" },
    );
    const box = await sandbox('sentinel_doctor');
    const report = await runDoctor({ load: () => loadConfig(envOf(box)), timeoutMs: 5000 });
    const redis = report.checks.find((c) => c.name === 'redis');
    expect(redis?.status).toBe('ok');
    expect(redis?.message).toContain(`sentinel: the master "${set.name}" through Sentinel`);
    expect(report.checks.find((c) => c.name === 'redis-maxmemory-policy')?.status).toBe('ok');
    const wait = report.checks.find((c) => c.name === 'redis-wait-replicas');
    expect(wait?.status).toBe('ok');
    expect(wait?.message).toMatch(
      /^1 \(the default under Sentinel, whose failover promotes a replica; the master has 1 replica\)/,
    );
  }, 60_000);
});
