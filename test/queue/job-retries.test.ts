import type { Job, Queue, Worker } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { createSync } from '../../src/sync/sync.js';
import { testConfig, testEnv } from '../support/config.js';
import { dropSchema, uniqueSchema } from '../support/postgres.js';
import { runCli, waitFor } from '../support/processes.js';
import { dropQueues, queuePrefix, testQueue, testWorker } from '../support/queues.js';
import { useSimulator } from '../support/simulator.js';

const schema = uniqueSchema('job_retries');
const prefix = await queuePrefix('job-retries');
const sim = useSimulator({ backlog: 3 });
const EMAIL = 'email-events';
const ATTEMPTS = 3;
const BACKOFF_MS = 40;
/** A CLI process on a busy machine: start-up alone can take seconds. */
const CLI_TIMEOUT_MS = 45_000;
const settings = { JOB_ATTEMPTS: String(ATTEMPTS), JOB_BACKOFF_MS: String(BACKOFF_MS) };
let queue: Queue;

beforeAll(async () => {
  queue = testQueue(EMAIL, prefix);
  const sync = createSync(testConfig({ schema, prefix, baseUrl: sim().baseUrl }, settings), {
    logger: createLogger({ level: 'silent' }),
    autoMigrate: true,
  });
  try {
    expect(await sync.runOnce()).toMatchObject({ stored: 3, drained: true });
  } finally {
    await sync.close();
  }
});
afterAll(async () => {
  await queue.close();
  await dropSchema(schema);
  await dropQueues(prefix);
});

/** A real BullMQ worker on the test's queue that runs `fn` for every job. */
function worker(fn: (job: Job) => void): Worker {
  return testWorker(EMAIL, prefix, async (job) => fn(job));
}

describe('job retries', () => {
  it('a consumer that throws gets each job JOB_ATTEMPTS times, with growing gaps, before it fails for good', async () => {
    const runs = new Map<string, number[]>();
    const failing = worker((job) => {
      const times = runs.get(job.id!) ?? [];
      times.push(Date.now());
      runs.set(job.id!, times);
      throw new Error('the consumer is broken');
    });
    try {
      await waitFor(async () => (await queue.getFailedCount()) === 3, { what: 'three failed jobs' });
    } finally {
      await failing.close();
    }
    expect([...runs.keys()].sort()).toEqual([
      'default/evt_000000000001',
      'default/evt_000000000002',
      'default/evt_000000000003',
    ]);
    for (const [id, times] of runs) {
      expect(times, id).toHaveLength(ATTEMPTS);
      // Exponential: the n-th retry waits at least BACKOFF_MS × 2^(n-1).
      expect(times[1]! - times[0]!, id).toBeGreaterThanOrEqual(BACKOFF_MS);
      expect(times[2]! - times[1]!, id).toBeGreaterThanOrEqual(2 * BACKOFF_MS);
    }
    const job = await queue.getJob('default/evt_000000000001');
    expect(job?.attemptsMade).toBe(ATTEMPTS);
    expect(job?.opts).toMatchObject({
      attempts: ATTEMPTS,
      backoff: { type: 'exponential', delay: BACKOFF_MS },
    });
  });

  it('`requeue --failed` moves them back with their ids, and a mended consumer completes them', async () => {
    const env = testEnv({ schema, prefix }, settings);
    const done: string[] = [];
    const mended = worker((job) => {
      done.push(job.id!);
    });
    try {
      const result = await runCli(['requeue', '--failed', '--queue', EMAIL], env, CLI_TIMEOUT_MS);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toContain(`${EMAIL}: 3 failed jobs moved back to waiting with their own ids`);
      expect(result.stdout).toContain('default/evt_000000000002');
      await waitFor(async () => (await queue.getCompletedCount()) === 3, { what: 'three completed jobs' });
    } finally {
      await mended.close();
    }
    expect(done.sort()).toEqual([
      'default/evt_000000000001',
      'default/evt_000000000002',
      'default/evt_000000000003',
    ]);
    expect(await queue.getFailedCount()).toBe(0);
    // Nothing left to retry: the next call says so, and touches the other queue too.
    const again = await runCli(['requeue', '--failed', '--json'], env, CLI_TIMEOUT_MS);
    expect(JSON.parse(again.stdout)).toEqual({ retried: { [EMAIL]: [], 'contact-events': [] } });
  }, 60_000);

  it('refuses --failed with --since, --queue without --failed, and an unknown queue (exit 2)', async () => {
    const env = testEnv({ schema, prefix });
    const cases = [
      ['--failed', '--since', '1h'],
      ['--since', '1h', '--queue', EMAIL],
      ['--failed', '--queue', 'nope'],
    ];
    const results = await Promise.all(cases.map((args) => runCli(['requeue', ...args], env, CLI_TIMEOUT_MS)));
    for (const [i, args] of cases.entries()) {
      const result = results[i]!;
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr.trim().split('\n').at(-1)).toMatch(/^feedsync: (requeue|--queue): /);
    }
  }, 60_000);
});
