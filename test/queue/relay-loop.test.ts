import { describe, expect, it } from 'vitest';
import type { ServiceEvent } from '../../src/api/types.js';
import { createLogger } from '../../src/logger.js';
import type { JobToAdd, Publisher } from '../../src/queue/publisher.js';
import { startRelay } from '../../src/queue/relay.js';
import type { OutboxEntry } from '../../src/store/applier.js';
import type { Outbox, OutboxRow } from '../../src/store/outbox.js';

const logger = createLogger({ level: 'silent' });

/** The outbox in memory: rows by seq, each published or not. */
function memoryOutbox() {
  const rows = new Map<bigint, { row: OutboxRow; published: boolean }>();
  let next = 1n;
  const outbox: Outbox = {
    async unpublished(limit, skip, maxBytes) {
      const skipped = new Set(skip);
      const open = [...rows.values()].filter((r) => !r.published && !skipped.has(r.row.seq)).slice(0, limit);
      // As the statement does: the rows that start under the budget.
      let before = 0;
      return open
        .filter((r) => {
          const starts = before;
          before += r.row.bytes;
          return starts < maxBytes;
        })
        .map((r) => r.row);
    },
    async unpublishedOf(seqs) {
      return seqs.filter((s) => rows.get(BigInt(s))?.published === false);
    },
    async markPublished(seqs) {
      const open = seqs.filter((s) => rows.get(BigInt(s))?.published === false);
      for (const s of open) rows.get(BigInt(s))!.published = true;
      return open;
    },
    async highestSeq() {
      return rows.size === 0 ? null : next - 1n;
    },
    async lowestUnpublished() {
      for (const [seq, r] of rows) if (!r.published) return seq;
      return null;
    },
  };
  /** Commits one row; returns the entry its committer would offer. */
  const commit = (id: string): OutboxEntry => {
    const seq = String(next++);
    const event: ServiceEvent = { id, type: 'email.sent', created_at: '2025-01-01T00:00:00.000Z', data: {} };
    const data = { source: 's', ...event };
    rows.set(BigInt(seq), {
      row: { seq, source: 's', eventId: id, queue: 'q', jobName: event.type, data, committedAt: 0, bytes: 150 },
      published: false,
    });
    return { seq, source: 's', queue: 'q', jobName: event.type, event };
  };
  const unpublishedCount = (): number => [...rows.values()].filter((r) => !r.published).length;
  return { outbox, commit, unpublishedCount };
}

function recordingPublisher(): Publisher & { added: JobToAdd[] } {
  const added: JobToAdd[] = [];
  return {
    added,
    async addBulk(_queue: string, jobs: readonly JobToAdd[]) {
      await new Promise((resolve) => setImmediate(resolve));
      added.push(...jobs);
    },
    present: async () => new Set<string>(),
    retryFailed: async () => [],
    ping: async () => true,
    counts: async () => ({}),
    close: async () => {},
  };
}

/** Idle sleeps end only when woken: no sweep ever comes. Backoffs return at once. */
const noSweep = (ms: number, signal?: AbortSignal): Promise<void> =>
  ms < 60_000
    ? Promise.resolve()
    : new Promise((_resolve, reject) => {
        if (signal?.aborted) reject(signal.reason);
        signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
      });

describe('the relay loop over an outbox in memory', () => {
  // The receiver's burst: commits offer their rows out of seq order while duplicates kick
  // the relay to read the outbox. A read that left out every seq from the lowest on offer
  // stranded the rows above it until the sweep.
  it('publishes every row without a sweep when offers arrive out of order among kicks', async () => {
    const { outbox, commit, unpublishedCount } = memoryOutbox();
    const publisher = recordingPublisher();
    const relay = startRelay({ outbox, publisher, logger, sleep: noSweep, batchSize: 3 });
    try {
      for (let round = 0; round < 50; round++) {
        const entries = Array.from({ length: 5 }, (_, i) => commit(`evt_${round}_${i}`));
        // Offered in reverse, a kick between each, as concurrent deliveries do.
        for (const entry of entries.reverse()) {
          relay.offer([entry]);
          if (round % 2 === 0) relay.kick();
          await new Promise((resolve) => setImmediate(resolve));
        }
      }
      await relay.drain();
      expect(unpublishedCount()).toBe(0);
      const ids = publisher.added.map((j) => j.jobId);
      expect(new Set(ids).size).toBe(250);
    } finally {
      await relay.stop();
    }
  });

  it('times each job from its commit: the clock given, once per job', async () => {
    const { outbox, commit } = memoryOutbox();
    const publisher = recordingPublisher();
    let clock = 1_000;
    const delays: number[] = [];
    const relay = startRelay({
      outbox,
      publisher,
      logger,
      sleep: noSweep,
      now: () => clock,
      onPublishDelay: (s) => delays.push(s),
    });
    try {
      const entry = commit('evt_timed');
      relay.offer([entry]);
      clock = 1_250;
      await relay.drain();
      expect(delays).toEqual([0.25]);
    } finally {
      await relay.stop();
    }
  });
});
