import { Queue } from 'bullmq';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ServiceEvent } from '../../src/api/types.js';
import { createLogger } from '../../src/logger.js';
import { jobDataBytes } from '../../src/queue/job-data.js';
import type { JobToAdd, Publisher } from '../../src/queue/publisher.js';
import { createRedisPublisher } from '../../src/queue/redis-publisher.js';
import { startRelay } from '../../src/queue/relay-loop.js';
import { routeFor } from '../../src/queue/routes.js';
import { createApplier, type OutboxEntry } from '../../src/store/applier.js';
import { createStore, type Store } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrate.js';
import { outboxBacklog, pgOutbox, pruneOutbox } from '../../src/store/outbox.js';
import { captureLogger } from '../support/logs.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import { waitFor } from '../support/processes.js';
import {
  deletePrefix,
  TEST_JOB_OPTIONS,
  TEST_REDIS,
  TEST_REDIS_URL,
  uniquePrefix,
} from '../support/redis.js';

const schema = uniqueSchema('relay');
const prefix = uniquePrefix('relay');
const queues = {
  prefix,
  emailEvents: 'email-events',
  contactEvents: 'contact-events',
  outboxRetentionHours: 168,
  jobAttempts: 5,
  jobBackoffMs: 1_000,
};
const logger = createLogger({ level: 'silent' });
let store: Store;

beforeAll(async () => {
  store = createStore({ url: TEST_DATABASE_URL, schema, max: 6 });
  await migrate(store);
});
afterAll(async () => {
  await store.close();
  await dropSchema(schema);
  await deletePrefix(prefix);
});
beforeEach(async () => {
  await store.pool.query(`TRUNCATE "${schema}".events, "${schema}".outbox`);
});

let serial = 0;
/** Stores `n` new events (alternating email and contact types, plus a type without a queue). */
async function storeEvents(n: number): Promise<ServiceEvent[]> {
  return (await storeBatch(n)).events;
}

/** The same, with the outbox rows the batch handed back for the relay. */
async function storeBatch(n: number): Promise<{ events: ServiceEvent[]; outbox: OutboxEntry[] }> {
  const types = ['email.sent', 'contact.subscribed', 'email.delivered', 'email.opened'];
  const events = Array.from({ length: n }, (_, i) => {
    serial++;
    return {
      id: `evt:${String(serial).padStart(6, '0')}`,
      type: types[i % types.length]!,
      created_at: new Date(Date.UTC(2024, 0, 1, 0, 0, serial)).toISOString(),
      data: { email_id: `em_${serial}`, to: ['a@example.com'] },
    };
  });
  const { outbox } = await createApplier(store, routeFor(queues)).apply({
    source: 's/1',
    receivedVia: 'feed',
    events,
    quarantine: [],
  });
  return { events, outbox };
}

/** A publisher that records what it is given and fails while `failing` is set. */
function recordingPublisher(): Publisher & {
  added: { queue: string; jobs: JobToAdd[] }[];
  failing: Error | null;
} {
  const rec = {
    added: [] as { queue: string; jobs: JobToAdd[] }[],
    failing: null as Error | null,
    async addBulk(queue: string, jobs: readonly JobToAdd[]) {
      // A real addBulk goes over the network: let the other relay's query run meanwhile.
      await new Promise((resolve) => setImmediate(resolve));
      if (rec.failing) throw rec.failing;
      rec.added.push({ queue, jobs: [...jobs] });
    },
    present: async () => new Set<string>(),
    retryFailed: async () => [],
    ping: async () => true,
    pings: 'redis' as const,
    counts: async () => ({}),
    close: async () => {},
  };
  return rec;
}

/** A relay reading the outbox back `batchSize` rows at a time until a drain() is done. */
async function drainWith(publisher: Publisher, batchSize: number): Promise<void> {
  const relay = startRelay({ outbox: pgOutbox(store), publisher, logger, batchSize, drainAttempts: 1 });
  try {
    await relay.drain();
  } finally {
    await relay.stop();
  }
}

describe('reading the outbox back', () => {
  it('adds each routed event to its queue with the contract job id, name, data and retention', async () => {
    const events = await storeEvents(8);
    const publisher = createRedisPublisher({ redis: TEST_REDIS, prefix, jobOptions: TEST_JOB_OPTIONS });
    try {
      await drainWith(publisher, 100);
    } finally {
      await publisher.close();
    }
    expect(await outboxBacklog(store)).toBe(0);
    const email = new Queue('email-events', { connection: { url: TEST_REDIS_URL }, prefix });
    try {
      const first = events[0]!;
      const job = await email.getJob(`s%2F1/${encodeURIComponent(first.id)}`);
      expect(job?.id).toBe(`s%2F1/evt%3A${first.id.slice(4)}`);
      expect(job?.name).toBe('email.sent');
      expect(job?.data).toEqual({ source: 's/1', ...first });
      expect(job?.opts).toMatchObject({
        removeOnComplete: { age: 7 * 24 * 3600 },
        removeOnFail: { age: 30 * 24 * 3600 },
      });
      expect(await email.getJobCountByTypes('waiting')).toBe(4);
    } finally {
      await email.close();
    }
  });

  it('publishes oldest first, in batches; two relays at the same rows give BullMQ each job once', async () => {
    const events = await storeEvents(60);
    const recorder = recordingPublisher();
    // A prefix of its own: the queues hold only this test's jobs.
    const own = `${prefix}-two`;
    const real = createRedisPublisher({ redis: TEST_REDIS, prefix: own, jobOptions: TEST_JOB_OPTIONS });
    // Both relays add to the real queues; the recorder sees what each call carried.
    const both: Publisher = {
      ...real,
      async addBulk(queue, jobs) {
        await recorder.addBulk(queue, jobs);
        await real.addBulk(queue, jobs);
      },
    };
    try {
      await Promise.all([drainWith(both, 7), drainWith(both, 7)]);
    } finally {
      await real.close();
    }
    for (const { jobs } of recorder.added) {
      const sorted = [...jobs].sort((a, b) => a.jobId.localeCompare(b.jobId));
      expect(jobs).toEqual(sorted);
    }
    const routed = events.filter((e) => e.type !== 'email.opened');
    // No transaction spans the adds, so both may add a row; BullMQ keeps one job per jobId.
    const ids = new Set(recorder.added.flatMap((a) => a.jobs.map((j) => j.jobId)));
    expect(ids.size).toBe(routed.length);
    const counts = await Promise.all(
      ['email-events', 'contact-events'].map(async (name) => {
        const queue = new Queue(name, { connection: { url: TEST_REDIS_URL }, prefix: own });
        try {
          return await queue.getJobCountByTypes('waiting');
        } finally {
          await queue.close();
        }
      }),
    );
    await deletePrefix(own);
    expect(counts[0]! + counts[1]!).toBe(routed.length);
    expect(await outboxBacklog(store)).toBe(0);
  });

  it('leaves the rows unpublished when addBulk fails', async () => {
    await storeEvents(4);
    const publisher = recordingPublisher();
    publisher.failing = new Error('Redis is down');
    await expect(drainWith(publisher, 100)).rejects.toThrow('Redis is down');
    expect(await outboxBacklog(store)).toBe(3);
  });
});

describe('the relay loop', () => {
  /** Idle sleeps wait for a kick; backoff sleeps are recorded and return at once. */
  function fakeSleep() {
    const backoffs: number[] = [];
    const sleep = (ms: number, signal?: AbortSignal): Promise<void> => {
      if (ms >= 60_000) {
        return new Promise((resolve) => {
          if (signal?.aborted) resolve();
          else signal?.addEventListener('abort', () => resolve(), { once: true });
        });
      }
      backoffs.push(ms);
      return Promise.resolve();
    };
    return { sleep, backoffs };
  }

  it('drain() rejects after drainAttempts failures in a row, backing off; drains once Redis answers', async () => {
    await storeEvents(8);
    const publisher = recordingPublisher();
    publisher.failing = new Error('Redis is down');
    const { sleep, backoffs } = fakeSleep();
    const relay = startRelay({
      outbox: pgOutbox(store),
      publisher,
      logger,
      sleep,
      drainAttempts: 3,
      maxBackoffMs: 1000,
    });
    try {
      await expect(relay.drain()).rejects.toThrow('Redis is down');
      expect(relay.lastError).toBe(publisher.failing);
      expect(await outboxBacklog(store)).toBe(6);
      // Full-jitter halves: each wait lies between half and all of min(max, 250 * 2^failures).
      backoffs.slice(0, 3).forEach((ms, i) => {
        const step = Math.min(1000, 250 * 2 ** (i + 1));
        expect(ms).toBeGreaterThanOrEqual(step / 2);
        expect(ms).toBeLessThanOrEqual(step);
      });

      publisher.failing = null;
      await relay.drain();
      expect(relay.lastError).toBeNull();
      expect(await outboxBacklog(store)).toBe(0);
      expect(publisher.added.flatMap((a) => a.jobs)).toHaveLength(6);
    } finally {
      await relay.stop();
    }
  });

  it('a drain() asked while a batch runs waits for the rows committed before it', async () => {
    await storeEvents(4);
    const publisher = recordingPublisher();
    const { sleep } = fakeSleep();
    const relay = startRelay({ outbox: pgOutbox(store), publisher, logger, sleep });
    try {
      const first = relay.drain();
      await storeEvents(4);
      await Promise.all([first, relay.drain()]);
      expect(await outboxBacklog(store)).toBe(0);
      expect(publisher.added.flatMap((a) => a.jobs)).toHaveLength(6);
    } finally {
      await relay.stop();
    }
  });
});

describe('rows offered by the run that committed them', () => {
  it('are published from memory, in order, without reading the outbox back', async () => {
    const { events, outbox } = await storeBatch(12);
    // Were the outbox read back, the jobs would carry this instead of the committed data.
    await store.pool.query(`UPDATE "${schema}".events SET data = '{"read": "back"}'`);
    const publisher = recordingPublisher();
    const relay = startRelay({ outbox: pgOutbox(store), publisher, logger });
    try {
      relay.offer(outbox);
      await relay.drain();
      const jobs = publisher.added.flatMap((a) => a.jobs);
      const routed = events.filter((e) => e.type !== 'email.opened');
      expect(jobs.map((j) => j.data)).toEqual(
        expect.arrayContaining(routed.map((e) => ({ source: 's/1', ...e }))),
      );
      expect(jobs).toHaveLength(routed.length);
      for (const { jobs: list } of publisher.added) {
        expect(list.map((j) => j.jobId)).toEqual([...list.map((j) => j.jobId)].sort());
      }
      expect(await outboxBacklog(store)).toBe(0);
    } finally {
      await relay.stop();
    }
  });

  it('stay on the memory path when the outbox is read meanwhile (a kick), which takes only older rows', async () => {
    const older = await storeBatch(4);
    const { outbox } = await storeBatch(8);
    await store.pool.query(`UPDATE "${schema}".events SET data = '{"read": "back"}'`);
    const publisher = recordingPublisher();
    const relay = startRelay({ outbox: pgOutbox(store), publisher, logger });
    try {
      relay.offer(outbox);
      relay.kick();
      await relay.drain();
      const jobs = publisher.added.flatMap((a) => a.jobs);
      const olderIds = new Set(older.outbox.map((e) => e.event.id));
      // The older rows nobody offered are read back; the offered ones come from memory.
      for (const job of jobs) {
        const data = job.data as { id: string; data: unknown };
        expect(data.data, data.id).toEqual(
          olderIds.has(data.id) ? { read: 'back' } : expect.objectContaining({ to: ['a@example.com'] }),
        );
      }
      expect(jobs).toHaveLength(older.outbox.length + outbox.length);
      expect(await outboxBacklog(store)).toBe(0);
    } finally {
      await relay.stop();
    }
  });

  it('are not published again when another relay took them first', async () => {
    const { outbox } = await storeBatch(20);
    const other = recordingPublisher();
    await drainWith(other, 4);
    const publisher = recordingPublisher();
    const relay = startRelay({ outbox: pgOutbox(store), publisher, logger });
    try {
      relay.offer(outbox);
      await relay.drain();
      expect(publisher.added.flatMap((a) => a.jobs)).toEqual([]);
      expect(other.added.flatMap((a) => a.jobs)).toHaveLength(15);
    } finally {
      await relay.stop();
    }
  });

  it('ready() holds a run back while the offers fill memory, and never while Redis is down', async () => {
    const first = await storeBatch(4);
    const second = await storeBatch(4);
    const publisher = recordingPublisher();
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    let adding = false;
    const add = publisher.addBulk;
    publisher.addBulk = async (queue, jobs) => {
      adding = true;
      await gate;
      return add(queue, jobs);
    };
    const relay = startRelay({ outbox: pgOutbox(store), publisher, logger, batchSize: 3, maxOffered: 3 });
    try {
      relay.offer(first.outbox);
      await waitFor(() => adding, { what: 'the relay to publish the first offer' });
      // The relay is busy with the first rows; three more fill what may wait in memory.
      relay.offer(second.outbox);
      let roomMade = false;
      const room = relay.ready().then(() => {
        roomMade = true;
      });
      // Deterministic: the relay is held inside addBulk, so no turn of the loop can make room.
      for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
      expect(roomMade).toBe(false);
      open();
      await room;
      await relay.drain();
      expect(publisher.added.flatMap((a) => a.jobs)).toHaveLength(6);

      publisher.failing = new Error('Redis is down');
      const third = await storeBatch(8);
      relay.offer(third.outbox);
      await waitFor(() => relay.lastError !== null, { what: 'the relay to fail' });
      relay.offer((await storeBatch(8)).outbox);
      await relay.ready();
      expect(await outboxBacklog(store)).toBe(12);
    } finally {
      open();
      await relay.stop();
    }
  });
});

describe('rows whose event is gone', () => {
  it('are marked without a job, and said at error level with the event named', async () => {
    const { outbox } = await storeBatch(4);
    const gone = outbox[0]!.event.id;
    await store.pool.query(`DELETE FROM "${schema}".events WHERE id = $1`, [gone]);
    const publisher = recordingPublisher();
    const { logger: captured, text } = captureLogger({ level: 'error' });
    const relay = startRelay({ outbox: pgOutbox(store), publisher, logger: captured });
    try {
      await relay.drain();
      const ids = publisher.added.flatMap((a) => a.jobs.map((j) => j.jobId));
      expect(ids).toHaveLength(outbox.length - 1);
      expect(ids.some((id) => id.endsWith(encodeURIComponent(gone)))).toBe(false);
      expect(await outboxBacklog(store)).toBe(0);
      expect(text()).toContain('without a job');
      expect(text()).toContain(JSON.stringify(gone));
    } finally {
      await relay.stop();
    }
  });
});

describe('the relay sweep', () => {
  it('publishes rows committed with nobody to kick it, once the sweep is due', async () => {
    const publisher = recordingPublisher();
    const idle: number[] = [];
    let fire: () => void = () => {};
    // The idle sleep ends when the test fires it, as its timer would.
    const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
      new Promise((resolve, reject) => {
        idle.push(ms);
        fire = resolve;
        signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
      });
    const relay = startRelay({ outbox: pgOutbox(store), publisher, logger, sleep, sweepMs: 5_000 });
    try {
      await waitFor(() => idle.length > 0, { what: 'the relay to sleep' });
      // A commit that finished after its 503 went out: stored, and nobody kicks the relay.
      await storeEvents(4);
      expect(await outboxBacklog(store)).toBe(3);
      fire();
      await waitFor(async () => (await outboxBacklog(store)) === 0, { what: 'the sweep to publish' });
      expect(publisher.added.flatMap((a) => a.jobs)).toHaveLength(3);
      expect(new Set(idle)).toEqual(new Set([5_000]));
    } finally {
      await relay.stop();
    }
  });
});

describe('pruneOutbox', () => {
  it('deletes published rows older than the retention and keeps the rest', async () => {
    await storeEvents(8);
    await store.pool.query(
      `UPDATE "${schema}".outbox SET published_at = now() - interval '10 hours'
        WHERE seq IN (SELECT seq FROM "${schema}".outbox ORDER BY seq LIMIT 2)`,
    );
    await store.pool.query(
      `UPDATE "${schema}".outbox SET published_at = now()
        WHERE seq IN (SELECT seq FROM "${schema}".outbox WHERE published_at IS NULL ORDER BY seq LIMIT 2)`,
    );
    expect(await pruneOutbox(store, 5)).toBe(2);
    expect(await outboxBacklog(store)).toBe(2);
    const { rows } = await store.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "${schema}".outbox`,
    );
    expect(rows[0]!.n).toBe(4);
  });
});

describe("the outbox read's byte budget", () => {
  it('measures each row as jobDataBytes does and sends only the rows that start under the budget', async () => {
    const sizes = [30_000, 10_000, 50_000, 5_000, 20_000];
    const events = sizes.map((pad, i) => ({
      id: `big:${String(++serial).padStart(6, '0')}`,
      type: 'email.delivered',
      created_at: new Date(Date.UTC(2024, 0, 2, 0, 0, i)).toISOString(),
      data: { email_id: `em_big_${i}`, to: ['a@example.com'], pad: 'x'.repeat(pad) },
    }));
    await createApplier(store, routeFor(queues)).apply({
      source: 's/1',
      receivedVia: 'feed',
      events,
      quarantine: [],
    });
    const outbox = pgOutbox(store);

    const all = await outbox.unpublished(1000, [], 1_000_000);
    expect(all.map((r) => r.eventId)).toEqual(events.map((e) => e.id));
    for (const [i, row] of all.entries()) {
      // Postgres's text of the data has a space after each colon and comma, and counts octets.
      const js = jobDataBytes('s/1', events[i]!);
      expect(row.bytes).toBeGreaterThanOrEqual(js);
      expect(row.bytes).toBeLessThan(js + 20);
    }

    // 30 kB + 10 kB reach 35 kB at the second row: the third starts past it and stays.
    const cut = await outbox.unpublished(1000, [], 35_000);
    expect(cut.map((r) => r.eventId)).toEqual(events.slice(0, 2).map((e) => e.id));
    // One row larger than the budget still goes, alone.
    expect((await outbox.unpublished(1000, [], 100)).map((r) => r.eventId)).toEqual([events[0]!.id]);
    // Rows left out (on offer) are not counted against the budget.
    const skip = all.slice(0, 2).map((r) => r.seq);
    expect((await outbox.unpublished(1000, skip, 40_000)).map((r) => r.eventId)).toEqual([events[2]!.id]);
    // The row limit holds as before.
    expect(await outbox.unpublished(2, [], 1_000_000)).toHaveLength(2);
  });
});
