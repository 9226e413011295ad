import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { runDoctor } from '../../src/doctor/doctor.js';
import { testEnv } from '../support/config.js';
import { killChildren, runCli } from '../support/processes.js';
import { expectNoRedisArguments, FAILED_RUN_LOG_BOUND } from '../support/redis-logs.js';
import {
  clusterJobCount,
  command,
  type LocalCluster,
  startLocalCluster,
} from '../support/redis-topologies.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import { outboxBacklogOf, type Sandbox, storedCount, useSandboxes } from '../sync/harness.js';

// One cluster for the file: creating one takes seconds.
let cluster: LocalCluster;
const BACKLOG = 600;
const sim = useSimulator({ backlog: BACKLOG });
// The cluster and its keys are gone after the file: no keys to delete.
const sandbox = useSandboxes({ redisUrl: () => null });

beforeAll(async () => {
  cluster = await startLocalCluster(3);
}, 60_000);
afterAll(async () => {
  await killChildren();
  await cluster?.dispose();
});

function envOf(box: Sandbox, extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    ...testEnv(
      { schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl },
      { REDIS_URL: cluster.url, ...extra },
    ),
  };
}

async function outboxRows(box: Sandbox): Promise<number> {
  const { rows } = await box.store.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${box.schema}".outbox`,
  );
  return rows[0]!.n;
}

/** Each case runs the CLI a few times against real servers; a slow, busy machine takes its time. */
const CLI_TEST_TIMEOUT_MS = 120_000;

describe('Redis Cluster', () => {
  it(
    'sync --once with the seed nodes: cluster detected, every event stored and published once',
    async () => {
      const box = await sandbox('cluster_once');
      const prefix = `{${box.prefix}}`;
      const first = await runCli(['sync', '--once', '--migrate'], envOf({ ...box, prefix }), 60_000);
      expect(first.code, first.stderr).toBe(0);
      expect(await storedCount(box.store)).toBe(BACKLOG);
      expect(await outboxBacklogOf(box.store)).toBe(0);
      const published = await outboxRows(box);
      expect(published).toBeGreaterThan(0);
      const jobs = async () =>
        (await clusterJobCount(cluster, prefix, 'email-events')) +
        (await clusterJobCount(cluster, prefix, 'contact-events'));
      expect(await jobs()).toBe(published);

      // One seed is enough to find the cluster; a second run adds nothing.
      const again = await runCli(
        ['sync', '--once'],
        envOf({ ...box, prefix }, { REDIS_URL: cluster.nodes[1]!.url }),
      );
      expect(again.code, again.stderr).toBe(0);
      expect(await jobs()).toBe(published);
      expect(`${first.stdout}${again.stdout}`).not.toContain(TEST_API_KEY);
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'a prefix without a hash tag: exit 2 with the fix, forced at start or detected before publishing',
    async () => {
      const box = await sandbox('cluster_notag');
      const forced = await runCli(['sync', '--once', '--migrate'], envOf(box, { REDIS_CLUSTER: 'true' }));
      expect(forced.code).toBe(2);
      expect(forced.stderr).toContain(`set QUEUE_PREFIX={${box.prefix}}`);
      expect(await storedCount(box.store)).toBe(0);

      const detected = await runCli(['sync', '--once', '--migrate'], envOf(box), 60_000);
      expect(detected.code).toBe(2);
      expect(detected.stderr).toMatch(
        /^feedsync: QUEUE_PREFIX: Redis is a cluster and the prefix ".*" has no hash tag/m,
      );
      expect(detected.stderr).toContain(`set QUEUE_PREFIX={${box.prefix}}`);
      // Nothing lost: the events are stored and wait in the outbox for a prefix that works.
      expect(await storedCount(box.store)).toBe(BACKLOG);
      expect(await outboxBacklogOf(box.store)).toBe(await outboxRows(box));
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'doctor names the mode and checks maxmemory-policy on every master',
    async () => {
      const box = await sandbox('cluster_doctor');
      const diagnose = async (extra: Record<string, string> = {}) => {
        const env = envOf({ ...box, prefix: `{${box.prefix}}` }, extra);
        const report = await runDoctor({ load: () => loadConfig(env), timeoutMs: 5000 });
        return (name: string) => report.checks.find((c) => c.name === name);
      };
      const good = await diagnose();
      expect(good('redis')).toMatchObject({
        status: 'ok',
        message: expect.stringContaining('cluster: a cluster of 3 masters'),
      });
      expect(good('redis-maxmemory-policy')).toMatchObject({
        status: 'ok',
        message: 'noeviction on all 3 masters',
      });
      expect(good('queues')?.status).toBe('ok');
      // Masters without replicas: nothing to fail over to, nothing to wait for.
      expect(good('redis-wait-replicas')).toMatchObject({
        status: 'ok',
        message: expect.stringMatching(
          /^0 \(the default: the master holding the queues' slot \d+ has 0 replicas/,
        ),
      });
      const forced = (await diagnose({ REDIS_WAIT_REPLICAS: '1' }))('redis-wait-replicas');
      expect(forced?.status).toBe('warn');
      expect(forced?.message).toContain('but only 0 are connected now');

      const evicting = cluster.nodes[2]!;
      await command(evicting.port, ['CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru']);
      try {
        const policy = (await diagnose())('redis-maxmemory-policy');
        expect(policy?.status).toBe('warn');
        expect(policy?.message).toContain(`allkeys-lru on 127.0.0.1:${evicting.port}`);
        expect(policy?.message.match(/allkeys-lru/g)).toHaveLength(1);
      } finally {
        await command(evicting.port, ['CONFIG', 'SET', 'maxmemory-policy', 'noeviction']);
      }

      const noTag = (await diagnose({ QUEUE_PREFIX: box.prefix }))('redis');
      expect(noTag?.status).toBe('fail');
      expect(noTag?.message).toContain('no hash tag');
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'MOVED from a node reached as one server: logged at trace by message, code and command only',
    async () => {
      const box = await sandbox('cluster_moved');
      const prefix = `{${box.prefix}}`;
      // A node that does not own the prefix's slot answers every job add with MOVED.
      const slot = Number(await command(cluster.nodes[0]!.port, ['CLUSTER', 'KEYSLOT', prefix]));
      const ranges = (await command(cluster.nodes[0]!.port, ['CLUSTER', 'SLOTS'])) as [
        number,
        number,
        [string, number],
      ][];
      const owner = ranges.find(([from, to]) => slot >= from && slot <= to)![2][1];
      const other = cluster.nodes.find((n) => n.port !== owner)!;
      const env = envOf(
        { ...box, prefix },
        { REDIS_URL: other.url, REDIS_CLUSTER: 'false', LOG_LEVEL: 'trace' },
      );
      const res = await runCli(['sync', '--once'], env, 60_000);
      const log = `${res.stdout}${res.stderr}`;
      expect(res.code).toBe(1);
      expect(log).toMatch(/"redisCode":"MOVED"/);
      expectNoRedisArguments(log, [TEST_API_KEY]);
      expect(log.length).toBeLessThan(FAILED_RUN_LOG_BOUND);
      expect(await storedCount(box.store)).toBe(BACKLOG);
      expect(await outboxBacklogOf(box.store)).toBe(await outboxRows(box));
    },
    CLI_TEST_TIMEOUT_MS,
  );
});
