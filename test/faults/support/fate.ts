import { Redis } from 'ioredis';
import pg from 'pg';
import { jobIdFor } from '../../../src/queue/routes.js';
import type { Store } from '../../../src/store/db.js';
import type { QueueHome } from './sandbox-queues.js';
import { routed, type Served } from './served.js';

export const QUEUES = ['email-events', 'contact-events'] as const;

/** What became of every served event: stored, published, enqueued; each how often. */
export interface Fate {
  /** Distinct events served. */
  served: number;
  stored: number;
  /** Served but not stored, or stored without its job. Counted once per event. */
  lost: number;
  /** Stored rows, outbox rows and jobs beyond one per event. */
  duplicated: number;
  /** Stored events that were never served (must be 0). */
  strangers: number;
  outboxRows: number;
  unpublished: number;
  jobs: number;
  jobsMissing: number;
}

/**
 * Compares the store and the queues of a sandbox with the served set. Jobs are read
 * from the Redis wait lists (no worker runs in these tests, so every added job waits
 * there) or, with the queues in Postgres, from BullMQ's job table.
 */
export async function fateOf(
  box: QueueHome & { store: Store },
  served: readonly Served[],
  source = 'default',
): Promise<Fate> {
  const s = `"${box.store.schema}"`;
  const servedIds = [...new Set(served.map((e) => e.id))];
  const { rows: ev } = await box.store.pool.query<{ id: string; n: number }>(
    `SELECT id, count(*)::int AS n FROM ${s}.events WHERE source = $1 GROUP BY id`,
    [source],
  );
  const stored = new Map(ev.map((r) => [r.id, r.n]));
  const { rows: ob } = await box.store.pool.query<{ event_id: string; n: number; open: number }>(
    `SELECT event_id, count(*)::int AS n, count(*) FILTER (WHERE published_at IS NULL)::int AS open
       FROM ${s}.outbox WHERE source = $1 GROUP BY event_id`,
    [source],
  );
  const jobs = await queuedJobIds(box, source);
  const jobCount = new Map<string, number>();
  for (const id of jobs) jobCount.set(id, (jobCount.get(id) ?? 0) + 1);

  const lost = new Set(servedIds.filter((id) => !stored.has(id)));
  let jobsMissing = 0;
  for (const e of routed(served)) {
    if (!jobCount.has(jobIdFor(source, e.id))) {
      jobsMissing++;
      lost.add(e.id);
    }
  }
  const beyondOne = (counts: Iterable<number>) => [...counts].reduce((a, n) => a + Math.max(0, n - 1), 0);
  const servedSet = new Set(servedIds);
  return {
    served: servedIds.length,
    stored: stored.size,
    lost: lost.size,
    duplicated: beyondOne(stored.values()) + beyondOne(ob.map((r) => r.n)) + beyondOne(jobCount.values()),
    strangers: [...stored.keys()].filter((id) => !servedSet.has(id)).length,
    outboxRows: ob.reduce((a, r) => a + r.n, 0),
    unpublished: ob.reduce((a, r) => a + r.open, 0),
    jobs: jobs.length,
    jobsMissing,
  };
}

/** Job ids of one source in the sandbox's queues: the Redis wait lists, or every state of the job table. */
export function queuedJobIds(box: QueueHome, source = 'default'): Promise<string[]> {
  return box.queueUrl ? pgJobIds(box.queueUrl, box.prefix, source) : jobIds(box.redisUrl, box.prefix, source);
}

/** Job ids of one source in every queue's wait list, repeats kept. */
export async function jobIds(redisUrl: string, prefix: string, source = 'default'): Promise<string[]> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  try {
    const lists = await Promise.all(QUEUES.map((q) => redis.lrange(`${prefix}:${q}:wait`, 0, -1)));
    const mine = `${encodeURIComponent(source)}/`;
    return lists.flat().filter((id) => id.startsWith(mine));
  } finally {
    redis.disconnect();
  }
}

/** Job ids of one source in both queues of a Postgres queues' schema, in every state. */
export async function pgJobIds(url: string, schema: string, source = 'default'): Promise<string[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ id: string }>(
      `SELECT id FROM "${schema}".job WHERE queue = ANY($1::text[]) AND starts_with(id, $2)`,
      [QUEUES, `${encodeURIComponent(source)}/`],
    );
    return rows.map((r) => r.id);
  } finally {
    await client.end();
  }
}
