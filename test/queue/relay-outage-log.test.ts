import { describe, expect, it } from 'vitest';
import type { ServiceEvent } from '../../src/api/types.js';
import { createRedisPublisher } from '../../src/queue/redis-publisher.js';
import { startRelay } from '../../src/queue/relay-loop.js';
import type { OutboxEntry } from '../../src/store/applier.js';
import type { Outbox, OutboxRow } from '../../src/store/outbox.js';
import { captureLogger } from '../support/logs.js';
import { startRedisServer } from '../support/processes.js';
import { redisSettings, TEST_JOB_OPTIONS, uniquePrefix } from '../support/redis.js';

/** The outbox in memory: the fault under test is Redis's, not Postgres's. */
function memoryOutbox() {
  const rows = new Map<string, { row: OutboxRow; published: boolean }>();
  let next = 1n;
  const open = () => [...rows.values()].filter((r) => !r.published);
  const outbox: Outbox = {
    unpublished: async (limit, skip) =>
      open()
        .filter((r) => !skip.includes(r.row.seq))
        .slice(0, limit)
        .map((r) => r.row),
    unpublishedOf: async (seqs) => seqs.filter((s) => rows.get(s)?.published === false),
    markPublished: async (seqs) => {
      const marked = seqs.filter((s) => rows.get(s)?.published === false);
      for (const s of marked) rows.get(s)!.published = true;
      return marked;
    },
    highestSeq: async () => (rows.size === 0 ? null : next - 1n),
    lowestUnpublished: async () => {
      const first = open()[0];
      return first ? BigInt(first.row.seq) : null;
    },
  };
  const commit = (id: string): OutboxEntry => {
    const seq = String(next++);
    const event: ServiceEvent = { id, type: 'email.sent', created_at: '2025-01-01T00:00:00.000Z', data: {} };
    rows.set(seq, {
      row: {
        seq,
        source: 's',
        eventId: id,
        queue: 'q',
        jobName: event.type,
        data: { source: 's', ...event },
        committedAt: 0,
        // Small rows: the relay's byte budget, which this outbox leaves alone, never binds.
        bytes: 150,
      },
      published: false,
    });
    return { seq, source: 's', queue: 'q', jobName: event.type, event };
  };
  return { outbox, commit, unpublished: () => open().length };
}

interface Line {
  level: number;
  module?: string;
  msg: string;
}

describe('the relay while Redis is down', () => {
  it('warns once when the outage begins, reminds at a bounded rate, and says once that it recovered', async () => {
    const redis = await startRedisServer();
    await redis.stop();
    const { outbox, commit, unpublished } = memoryOutbox();
    const publisher = createRedisPublisher({
      redis: redisSettings(redis.url),
      prefix: uniquePrefix('relay-outage'),
      jobOptions: TEST_JOB_OPTIONS,
      timeoutMs: 500,
    });
    const { logger, text } = captureLogger();
    const remindMs = 400;
    const relay = startRelay({ outbox, publisher, logger, maxBackoffMs: 50, remindMs, drainAttempts: 1_000 });
    const lines = (): Line[] =>
      text()
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Line)
        .filter((l) => l.module === 'relay');
    try {
      const started = performance.now();
      // A catch-up committing while Redis is down: every commit offers its rows.
      for (let i = 0; i < 100; i++) {
        relay.offer([commit(`evt_${i}`)]);
        await new Promise((resolve) => setTimeout(resolve, 15));
      }
      const elapsed = performance.now() - started;
      const failures = lines().filter((l) => /failed/.test(l.msg));
      const warnings = lines().filter((l) => l.level === 40);
      // Many failures, few warnings: the first, then one per remindMs at most.
      expect(failures.length).toBeGreaterThan(warnings.length);
      expect(warnings[0]?.msg).toMatch(/^outbox relay failed; retrying/);
      expect(warnings.length).toBeLessThanOrEqual(1 + Math.ceil(elapsed / remindMs));
      expect(warnings.slice(1).every((l) => /still failing/.test(l.msg))).toBe(true);

      await redis.start();
      await relay.drain();
      expect(unpublished()).toBe(0);
      expect(lines().filter((l) => /recovered/.test(l.msg))).toHaveLength(1);
    } finally {
      await relay.stop();
      await publisher.close();
      await redis.dispose();
    }
  }, 60_000);
});
