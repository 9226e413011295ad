import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { statusReport } from '../../src/cli/status-report.js';
import { loadConfig } from '../../src/config/config.js';
import { createRedisPublisher } from '../../src/queue/redis-publisher.js';
import { jobOptionsFor } from '../../src/queue/routes.js';
import type { Simulator } from '../../src/simulator/index.js';
import { testEnv } from '../support/config.js';
import { CLI, killChildren, spawnNode, waitFor } from '../support/processes.js';
import { startTestSimulator } from '../support/simulator.js';
import { cursorOf, expectExactlyOnce, useSandboxes } from './harness.js';

/**
 * Three `sync --watch` replicas over one sources file; one is SIGKILLed while it
 * holds sources mid-run. Its locks die with its connections, the two others take its
 * sources on their next turn, and every account ends stored and enqueued once.
 */
const SOURCES = 9;
const backlogOf = (i: number): number => 600 + 10 * i;
const id = (position: number): string => `evt_${String(position).padStart(12, '0')}`;

const sandbox = useSandboxes();
const dir = mkdtempSync(join(tmpdir(), 'feedsync-replicas-'));
let sim: Simulator;
const keyOf = (i: number): string => `acct_test_replica${i}`;

beforeAll(async () => {
  // Latency stretches a source's run over many pages, so the kill lands mid-run.
  sim = await startTestSimulator({ faults: { latencyMs: 40 } });
  for (let i = 0; i < SOURCES; i++) sim.account(keyOf(i)).setBacklog(backlogOf(i));
});
afterAll(async () => {
  await killChildren();
  await sim.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('replicas of sync --watch over a sources file', () => {
  it('one SIGKILLed mid-run: its sources move to the others, nothing lost, nothing twice', async () => {
    const box = await sandbox('replicas');
    const keyEnv: Record<string, string> = {};
    const entries = Array.from({ length: SOURCES }, (_, i) => {
      keyEnv[`KEY_${i}`] = keyOf(i);
      return { source: `acct-${i}`, base_url: sim.baseUrl, api_key_env: `KEY_${i}` };
    });
    const file = join(dir, 'sources.json');
    writeFileSync(file, JSON.stringify({ sources: entries }));
    const env = testEnv(
      { schema: box.schema, prefix: box.prefix },
      {
        ...keyEnv,
        FEED_SOURCES_FILE: file,
        FEED_PAGE_LIMIT: '10',
        SYNC_CONCURRENCY: '2',
        SYNC_INTERVAL_MS: '300',
        // The killed replica's leases run out this soon after.
        SOURCE_LEASE_MS: '2000',
        METRICS_PORT: '0',
        LOG_LEVEL: 'info',
      },
    );
    const replica = (name: string) => spawnNode([CLI, 'sync', '--watch'], { ...env, HOSTNAME: name });
    const [a, b, c] = [replica('replica-a'), replica('replica-b'), replica('replica-c')];

    // status names the replica that holds a source; wait until replica-a holds one mid-run.
    const config = loadConfig(env);
    const publisher = createRedisPublisher({
      redis: config.redis,
      prefix: config.queues.prefix,
      jobOptions: jobOptionsFor(config.queues),
    });
    const final = new Set(entries.map((_, i) => id(backlogOf(i))));
    const held = await waitFor(
      async () => {
        const report = await statusReport(config, box.store, publisher);
        return (
          report.sources.find(
            (s) =>
              s.lease?.holder.startsWith('replica-a/') === true && s.cursor !== null && !final.has(s.cursor),
          ) ?? null
        );
      },
      { what: 'replica-a to hold a source mid-run', timeoutMs: 60_000 },
    ).finally(() => publisher.close());
    a.signal('SIGKILL');
    expect((await a.exited).signal).toBe('SIGKILL');

    // The killed replica's source is finished by another one.
    await waitFor(async () => (await cursorOf(box.store, held.source)) !== held.cursor, {
      what: `another replica to take ${held.source}`,
      timeoutMs: 60_000,
    });
    for (let i = 0; i < SOURCES; i++) {
      await waitFor(async () => (await cursorOf(box.store, `acct-${i}`)) === id(backlogOf(i)), {
        what: `acct-${i} caught up`,
        timeoutMs: 90_000,
      });
    }
    b.signal('SIGTERM');
    c.signal('SIGTERM');
    const ends = await Promise.all([b.waitExit(20_000), c.waitExit(20_000)]);
    for (const end of ends) expect(end.code, end.stderr).toBe(0);

    for (let i = 0; i < SOURCES; i++) {
      await expectExactlyOnce({
        store: box.store,
        prefix: box.prefix,
        expected: backlogOf(i),
        source: `acct-${i}`,
      });
    }
    // A survivor's summary line says it finished the source the killed replica held.
    const finished = ends.flatMap((end) =>
      end.stdout
        .split('\n')
        .filter((l) => l.includes('"source finished"'))
        .map((l) => JSON.parse(l) as { source: string; stored: number }),
    );
    expect(finished.some((l) => l.source === held.source && l.stored > 0)).toBe(true);
    for (const end of ends) expect(end.stdout + end.stderr).not.toContain('acct_test_replica');
  }, 180_000);
});
