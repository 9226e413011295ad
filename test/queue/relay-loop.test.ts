import { describe, expect, it } from 'vitest';
import type { ServiceEvent } from '../../src/api/types.js';
import { createLogger } from '../../src/logger.js';
import { jobDataBytes } from '../../src/queue/job-data.js';
import type { JobToAdd, Publisher } from '../../src/queue/publisher.js';
import { RELAY_DEFAULTS } from '../../src/queue/relay.js';
import { startRelay } from '../../src/queue/relay-loop.js';
import type { OutboxEntry } from '../../src/store/applier.js';
import type { Outbox, OutboxRow } from '../../src/store/outbox.js';

const logger = createLogger({ level: 'silent' });

/** The outbox in memory: rows by seq, each published or not; the bytes of each read are kept. */
function memoryOutbox() {
  const rows = new Map<bigint, { row: OutboxRow; published: boolean }>();
  const reads: number[][] = [];
  let next = 1n;
  const outbox: Outbox = {
    async unpublished(limit, skip, maxBytes) {
      const skipped = new Set(skip);
      const open = [...rows.values()].filter((r) => !r.published && !skipped.has(r.row.seq)).slice(0, limit);
      // As the statement does: the rows that start under the budget.
      let before = 0;
      const read = open
        .filter((r) => {
          const starts = before;
          before += r.row.bytes;
          return starts < maxBytes;
        })
        .map((r) => r.row);
      reads.push(read.map((r) => r.bytes));
      return read;
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
  /** Commits one row (its data padded with `pad` characters); returns the entry its committer would offer. */
  const commit = (id: string, pad = 0): OutboxEntry => {
    const seq = String(next++);
    const event: ServiceEvent = {
      id,
      type: 'email.sent',
      created_at: '2025-01-01T00:00:00.000Z',
      data: pad > 0 ? { pad: 'x'.repeat(pad) } : {},
    };
    const data = { source: 's', ...event };
    const bytes = jobDataBytes('s', event);
    rows.set(BigInt(seq), {
      row: { seq, source: 's', eventId: id, queue: 'q', jobName: event.type, data, committedAt: 0, bytes },
      published: false,
    });
    return { seq, source: 's', queue: 'q', jobName: event.type, event };
  };
  const unpublishedCount = (): number => [...rows.values()].filter((r) => !r.published).length;
  return { outbox, commit, unpublishedCount, reads };
}

/** A publisher that keeps what it added; while `held`, each addBulk waits for release(). */
function recordingPublisher(): Publisher & {
  added: JobToAdd[];
  calls: JobToAdd[][];
  held: boolean;
  release(): void;
} {
  const added: JobToAdd[] = [];
  const calls: JobToAdd[][] = [];
  let waiting: (() => void)[] = [];
  return {
    added,
    calls,
    held: false,
    release() {
      this.held = false;
      for (const resolve of waiting.splice(0)) resolve();
    },
    async addBulk(_queue: string, jobs: readonly JobToAdd[]) {
      await new Promise((resolve) => setImmediate(resolve));
      if (this.held) await new Promise<void>((resolve) => waiting.push(resolve));
      calls.push([...jobs]);
      added.push(...jobs);
    },
    present: async () => new Set<string>(),
    retryFailed: async () => [],
    ping: async () => true,
    pings: 'redis' as const,
    counts: async () => ({}),
    close: async () => {
      waiting = [];
    },
  };
}

/** The bytes of a batch of jobs, as the relay counts them. */
function bytesOf(jobs: readonly JobToAdd[]): number[] {
  return jobs.map((j) => {
    const { source, ...event } = j.data as { source: string } & ServiceEvent;
    return jobDataBytes(source, event);
  });
}

/** A batch stops at the first row that reaches the budget: all but its last are under it. */
function startsUnder(bytes: readonly number[], budget: number): boolean {
  return bytes.slice(0, -1).reduce((a, b) => a + b, 0) < budget;
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

  it('holds job data by bytes: batches and reads stop at batchBytes, ready() waits for room, an offer past the budget goes to the outbox', async () => {
    const { outbox, commit, unpublishedCount, reads } = memoryOutbox();
    const publisher = recordingPublisher();
    const batchBytes = 10_000;
    const maxHeldBytes = 30_000;
    const relay = startRelay({ outbox, publisher, logger, sleep: noSweep, batchBytes, maxHeldBytes });
    try {
      // Twelve rows of about 4 kB: the budget takes the first eight (about 33 kB), the rest stays in the outbox.
      publisher.held = true;
      const entries = Array.from({ length: 12 }, (_, i) => commit(`evt_big_${i}`, 4_000));
      relay.offer(entries);
      let ready = false;
      const waited = relay.ready().then(() => {
        ready = true;
      });
      for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
      // The first batch is on its way (held by the publisher), the rest on offer: no room.
      expect(ready).toBe(false);
      publisher.release();
      await waited;
      await relay.drain();

      expect(unpublishedCount()).toBe(0);
      expect(new Set(publisher.added.map((j) => j.jobId)).size).toBe(12);
      for (const call of publisher.calls) expect(startsUnder(bytesOf(call), batchBytes)).toBe(true);
      // Three jobs of 4 kB reach 10 kB: no batch from memory holds more.
      expect(Math.max(...publisher.calls.map((c) => c.length))).toBe(3);
      // The rows the offer left behind were read back, a budget at a time.
      const readRows = reads.filter((r) => r.length > 0);
      expect(readRows.flat().length).toBeGreaterThan(0);
      for (const read of readRows) expect(startsUnder(read, batchBytes)).toBe(true);
    } finally {
      await relay.stop();
    }
  });

  it('reads large rows a budget at a time and asks for fewer of them once it has seen their size', async () => {
    const { outbox, commit, unpublishedCount, reads } = memoryOutbox();
    const publisher = recordingPublisher();
    const asked: number[] = [];
    const counting: typeof outbox = {
      ...outbox,
      unpublished: (limit, skip, maxBytes) => {
        asked.push(limit);
        return outbox.unpublished(limit, skip, maxBytes);
      },
    };
    const relay = startRelay({ outbox: counting, publisher, logger, sleep: noSweep, batchBytes: 20_000 });
    try {
      for (let i = 0; i < 30; i++) commit(`evt_row_${i}`, 9_000);
      relay.kick();
      await relay.drain();
      expect(unpublishedCount()).toBe(0);
      expect(publisher.added).toHaveLength(30);
      for (const read of reads.filter((r) => r.length > 0)) expect(startsUnder(read, 20_000)).toBe(true);
      // The first read asks for the default thousand; the next ones for about twice what fits.
      expect(asked[0]).toBe(RELAY_DEFAULTS.batchSize);
      expect(Math.max(...asked.slice(1))).toBeLessThanOrEqual(6);
    } finally {
      await relay.stop();
    }
  });
});
