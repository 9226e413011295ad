import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../src/logger.js';
import type { Outcome } from '../../src/sync/scheduler.js';
import { runWorker, type WorkerResult } from '../../src/sync/worker.js';
import { testConfig } from '../support/config.js';
import { dropSchema, uniqueSchema } from '../support/postgres.js';
import { dropQueues, queuePrefix } from '../support/queues.js';
import { useSimulator } from '../support/simulator.js';

// runWorker in this process, once, over a sources file of three accounts of one
// simulator: two with a backlog, one whose key the service rejects.

const schema = uniqueSchema('worker');
const prefix = await queuePrefix('worker');
const dir = mkdtempSync(join(tmpdir(), 'feedsync-worker-'));
const OTHER_KEY = `acct_test_worker${Math.random().toString(36).slice(2, 12)}`;
const sim = useSimulator({ backlog: 5 });

beforeAll(() => {
  sim().account(OTHER_KEY).setBacklog(3);
});
afterAll(async () => {
  await dropSchema(schema);
  await dropQueues(prefix);
  rmSync(dir, { recursive: true, force: true });
});

describe('runWorker, once', () => {
  it('runs every source of the file once, returns their outcomes, and writes nothing to stderr', async () => {
    const file = join(dir, 'sources.json');
    const base = sim().baseUrl;
    const sources = [
      // No key of its own: FEED_API_KEY, the simulator's default account.
      { source: 'acct-default', base_url: base },
      { source: 'acct-other', base_url: base, api_key_env: 'OTHER_KEY' },
      { source: 'acct-rejected', base_url: base, api_key_env: 'REJECTED_KEY' },
    ];
    writeFileSync(file, JSON.stringify({ sources }));
    const config = testConfig(
      { schema, prefix },
      { FEED_SOURCES_FILE: file, OTHER_KEY, REJECTED_KEY: 'not-a-valid-key-0123456789' },
    );
    const committed = new Map<string, number>();
    const seen: Outcome[] = [];
    const order: string[] = [];
    let metricsAtEnd = '';
    const stderr = vi.spyOn(process.stderr, 'write');
    let run: WorkerResult;
    try {
      run = await runWorker(config, {
        mode: 'once',
        migrate: true,
        logger: createLogger({ level: 'silent' }),
        hooks: {
          onCommit: (source, info) =>
            committed.set(source, (committed.get(source) ?? 0) + info.result.inserted.length),
          onOutcome: (outcome) => seen.push(outcome),
          onTurnsDone: () => order.push('turns done'),
          onRunEnd: async (result) => {
            order.push('run end');
            // The parts are still open: the gauges read from Postgres answer.
            metricsAtEnd = await result.registry.metrics();
          },
        },
      });
    } finally {
      stderr.mockRestore();
    }
    expect(stderr).not.toHaveBeenCalled();
    expect(order).toEqual(['turns done', 'run end']);
    const bySource = new Map(run.outcomes.map((o) => [o.source, o]));
    expect(bySource.get('acct-default')).toMatchObject({
      ok: true,
      result: { status: 'caught-up', stored: 5, drained: true },
    });
    expect(bySource.get('acct-other')).toMatchObject({
      ok: true,
      result: { status: 'caught-up', stored: 3, drained: true },
    });
    const rejected = bySource.get('acct-rejected');
    expect(rejected?.ok).toBe(false);
    expect(rejected && !rejected.ok && (rejected.error as Error).name).toBe('AuthError');
    expect(seen).toEqual(run.outcomes);
    expect(Object.fromEntries(committed)).toEqual({ 'acct-default': 5, 'acct-other': 3 });
    expect(run).toMatchObject({ handedOver: true, stoppedShort: false });
    expect(metricsAtEnd).toContain('feedsync_outbox_backlog 0');
  }, 60_000);
});
