import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, expect } from 'vitest';
import { CONTACT_EVENT_TYPES, EMAIL_EVENT_TYPES } from '../../src/event-types.js';
import type { Logger } from '../../src/logger.js';
import { jobIdFor } from '../../src/queue/routes.js';
import { createStore, type Store } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrate.js';
import { captureLogger as captureLines } from '../support/logs.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import { waitFor } from '../support/processes.js';
import { dropQueues, queuePrefix, TEST_QUEUE_BACKEND, testQueue, waitingJobIds } from '../support/queues.js';
import { deletePrefix, TEST_REDIS_URL } from '../support/redis.js';
import { TEST_API_KEY } from '../support/simulator.js';

/** Queues of the default config (QUEUE_EMAIL_EVENTS, QUEUE_CONTACT_EVENTS). */
export const EMAIL_QUEUE = 'email-events';
export const CONTACT_QUEUE = 'contact-events';
const ROUTED_TYPES = [...EMAIL_EVENT_TYPES, ...CONTACT_EVENT_TYPES];

/** A logger kept in memory, with the API key scrubbed as the CLI's logger would. */
export function captureLogger(level = 'debug'): { logger: Logger; text: () => string } {
  return captureLines({ secrets: [TEST_API_KEY], level });
}

/** A migrated schema and a queue prefix of one test's own. */
export interface Sandbox {
  schema: string;
  prefix: string;
  store: Store;
}

/**
 * Makes sandboxes on demand and drops every one of them (schema and Redis keys)
 * in afterAll, so a file can give each case a clean slate.
 */
export function useSandboxes(
  opts: {
    /** The Redis whose keys to delete; null: none (a private server that is gone by then). */
    redisUrl?: () => string | null;
  } = {},
): (label: string) => Promise<Sandbox> {
  const made: Sandbox[] = [];
  afterAll(async () => {
    for (const box of made) {
      await box.store.close();
      await dropSchema(box.schema);
      if (TEST_QUEUE_BACKEND === 'postgres') {
        await dropQueues(box.prefix);
        continue;
      }
      const redisUrl = opts.redisUrl ? opts.redisUrl() : TEST_REDIS_URL;
      if (redisUrl) await deletePrefix(box.prefix, redisUrl);
    }
  });
  return async (label) => {
    const schema = uniqueSchema(label);
    // Named apart from the workers' connections, which waitForWorkersGone looks for.
    const store = createStore({ url: TEST_DATABASE_URL, schema, applicationName: 'feedsync-test' });
    const box = { schema, prefix: await queuePrefix(label.replace(/_/g, '-')), store };
    made.push(box);
    await migrate(store);
    return box;
  };
}

/** A deterministic source of randomness in [0, 1), for the simulator's fault draws. */
export { seeded as seededRandom } from '../support/random.js';

/** The feed position of a simulator event id (`evt_000000000042` is 42). */
export function positionOf(id: string): number {
  const m = /^evt_(\d{12})$/.exec(id);
  if (!m) throw new Error(`not a simulator feed id: ${id}`);
  return Number(m[1]);
}

export async function storedCount(store: Store, source = 'default'): Promise<number> {
  const { rows } = await store.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${store.schema}".events WHERE source = $1`,
    [source],
  );
  return rows[0]!.n;
}

export async function cursorOf(store: Store, source = 'default'): Promise<string | null> {
  const { rows } = await store.pool.query<{ after_id: string | null }>(
    `SELECT after_id FROM "${store.schema}".cursors WHERE source = $1`,
    [source],
  );
  return rows[0]?.after_id ?? null;
}

export async function outboxBacklogOf(store: Store, source = 'default'): Promise<number> {
  const { rows } = await store.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${store.schema}".outbox WHERE source = $1 AND published_at IS NULL`,
    [source],
  );
  return rows[0]!.n;
}

/**
 * The ids of every job in a queue's wait list (where jobs stay while no worker
 * runs), and the queue's total of jobs in every state, which must be the same.
 */
export async function queuedJobIds(
  prefix: string,
  queue: string,
  redisUrl = TEST_REDIS_URL,
): Promise<string[]> {
  if (TEST_QUEUE_BACKEND === 'postgres') {
    const q = testQueue(queue, prefix);
    try {
      const counts = await q.getJobCounts(
        'waiting',
        'active',
        'completed',
        'failed',
        'delayed',
        'prioritized',
      );
      const ids = await waitingJobIds(q);
      expect(
        Object.values(counts).reduce((a, b) => a + b, 0),
        `jobs of ${queue} outside waiting`,
      ).toBe(ids.length);
      return ids;
    } finally {
      await q.close();
    }
  }
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  const q = new Queue(queue, { connection: { url: redisUrl }, prefix });
  try {
    const ids = await redis.lrange(`${prefix}:${queue}:wait`, 0, -1);
    const counts = await q.getJobCounts('waiting', 'active', 'completed', 'failed', 'delayed', 'prioritized');
    expect(
      Object.values(counts).reduce((a, b) => a + b, 0),
      `jobs of ${queue} outside its wait list`,
    ).toBe(ids.length);
    return ids;
  } finally {
    await q.close();
    redis.disconnect();
  }
}

/**
 * The end state every sync test wants: `expected` events of the source stored,
 * one outbox row per email or contact event and all of them published, and one
 * job per such event across the two queues (jobId = source/event id), no more.
 */
export async function expectExactlyOnce(opts: {
  store: Store;
  prefix: string;
  expected: number;
  source?: string;
  redisUrl?: string;
}): Promise<void> {
  const { store, prefix } = opts;
  const source = opts.source ?? 'default';
  const s = `"${store.schema}"`;
  expect(await storedCount(store, source), 'events stored').toBe(opts.expected);
  const routed = await store.pool.query<{ id: string }>(
    `SELECT id FROM ${s}.events WHERE source = $1 AND type = ANY($2::text[])`,
    [source, ROUTED_TYPES],
  );
  const outbox = await store.pool.query<{ rows: number; events: number; open: number }>(
    `SELECT count(*)::int AS rows, count(DISTINCT event_id)::int AS events,
            count(*) FILTER (WHERE published_at IS NULL)::int AS open
       FROM ${s}.outbox WHERE source = $1`,
    [source],
  );
  expect(outbox.rows[0], 'outbox rows: one per routed event, all published').toEqual({
    rows: routed.rows.length,
    events: routed.rows.length,
    open: 0,
  });
  const mine = `${encodeURIComponent(source)}/`;
  const jobs = [
    ...(await queuedJobIds(prefix, EMAIL_QUEUE, opts.redisUrl)),
    ...(await queuedJobIds(prefix, CONTACT_QUEUE, opts.redisUrl)),
  ].filter((id) => id.startsWith(mine));
  expect(new Set(jobs).size, 'no job twice').toBe(jobs.length);
  const wanted = routed.rows.map((r) => jobIdFor(source, r.id)).sort();
  expect(jobs.length, 'one job per email or contact event').toBe(wanted.length);
  expect(jobs.sort()).toEqual(wanted);
}

/**
 * The cursor never passes a bad page: with the simulator's consecutive ids, the
 * events stored are exactly those up to the cursor, none after it.
 */
export async function expectStoredUpToCursor(store: Store, source = 'default'): Promise<string | null> {
  const cursor = await cursorOf(store, source);
  const { rows } = await store.pool.query<{ n: number; last: string | null }>(
    `SELECT count(*)::int AS n, max(id) AS last FROM "${store.schema}".events WHERE source = $1`,
    [source],
  );
  const { n, last } = rows[0]!;
  if (cursor === null) {
    expect(n, 'nothing stored without a cursor').toBe(0);
  } else {
    expect(last, 'nothing stored past the cursor').toBe(cursor);
    expect(n, 'every event up to the cursor stored').toBe(positionOf(cursor));
  }
  return cursor;
}

/**
 * Waits until no worker connection (application_name `feedsync`) that ran a
 * statement on this schema is left; a killed worker's last statement still runs,
 * and commits, after the process is gone. Then ends the lease the worker may have
 * left behind, as SOURCE_LEASE_MS passing would (test/faults time that part).
 */
export async function waitForWorkersGone(store: Store, source = 'default'): Promise<void> {
  await waitFor(
    async () => {
      const { rows } = await store.pool.query<{ busy: number }>(
        `SELECT count(*)::int AS busy FROM pg_stat_activity
          WHERE application_name = 'feedsync' AND pid <> pg_backend_pid() AND query LIKE $1`,
        [`%"${store.schema}"%`],
      );
      return rows[0]!.busy === 0;
    },
    { what: "the worker's connections to end" },
  );
  await store.pool.query(
    `UPDATE "${store.schema}".leases SET expires_at = now() WHERE source = $1 AND holder IS NOT NULL`,
    [source],
  );
}

/** Loses events as a bad restore or a manual delete would: the rows, their outbox rows and their jobs. */
export async function lose(box: Sandbox, ids: string[], source = 'default'): Promise<void> {
  const s = `"${box.schema}"`;
  await box.store.pool.query(`DELETE FROM ${s}.outbox WHERE source = $1 AND event_id = ANY($2)`, [
    source,
    ids,
  ]);
  const gone = await box.store.pool.query(`DELETE FROM ${s}.events WHERE source = $1 AND id = ANY($2)`, [
    source,
    ids,
  ]);
  expect(gone.rowCount).toBe(ids.length);
  for (const name of [EMAIL_QUEUE, CONTACT_QUEUE]) {
    const queue = testQueue(name, box.prefix);
    try {
      for (const eventId of ids) await queue.remove(jobIdFor(source, eventId));
    } finally {
      await queue.close();
    }
  }
}
