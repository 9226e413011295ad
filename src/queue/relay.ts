import type pg from 'pg';
import { defaultSleep } from '../api/retry.js';
import { ConfigError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { OutboxEntry } from '../store/applier.js';
import { quoteSchema, type Store } from '../store/db.js';
import { type JobData, jobData, outboxJobDataSql } from './job-data.js';
import type { JobToAdd, Publisher } from './publisher.js';
import { jobIdFor } from './routes.js';

export interface RelayOptions {
  store: Store;
  publisher: Publisher;
  logger: Logger;
  /** Outbox rows per addBulk. Default 1000. */
  batchSize?: number;
  /** Consecutive failures after which drain() gives up (the loop itself goes on). Default 5. */
  drainAttempts?: number;
  /** Longest pause between retries while Redis is down. Default 30 s. */
  maxBackoffMs?: number;
  /**
   * How long the loop sleeps without a kick before it looks at the outbox anyway,
   * in ms. Default 60000. Rows can be committed with nobody left to kick: a
   * webhook delivery whose commit finished after its 503 went out.
   */
  sweepMs?: number;
  /** Offered rows in memory past which ready() waits and offers are left to the outbox. Default 4 × batchSize. */
  maxOffered?: number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  onPublished?: (queue: string, count: number) => void;
}

interface OutboxRow {
  seq: string;
  source: string;
  event_id: string;
  queue: string;
  job_name: string;
  data: JobData | null;
}

type Db = Pick<pg.ClientBase, 'query'>;

/**
 * Runs `fn` in a transaction on a client of its own. The transaction stays open while
 * Redis answers; if Postgres ends the session meanwhile, a checked-out client without
 * a listener would crash the process, so the error is kept and thrown instead.
 */
async function inTransaction<T>(store: Store, begin: string, fn: (db: Db) => Promise<T>): Promise<T> {
  const client = await store.pool.connect();
  let broken: Error | undefined;
  const onError = (err: Error): void => {
    broken = err;
  };
  client.on('error', onError);
  try {
    await client.query(begin);
    const value = await fn(client);
    await client.query('COMMIT');
    return value;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw broken ?? err;
  } finally {
    client.off('error', onError);
    client.release(broken);
  }
}

/** addBulk per queue, each queue's jobs in the order given. */
async function addInOrder(
  publisher: Publisher,
  jobs: readonly { queue: string; job: JobToAdd }[],
  onPublished?: (queue: string, count: number) => void,
): Promise<void> {
  const byQueue = new Map<string, JobToAdd[]>();
  for (const { queue, job } of jobs) {
    const list = byQueue.get(queue) ?? [];
    byQueue.set(queue, list);
    list.push(job);
  }
  for (const [queue, list] of byQueue) {
    await publisher.addBulk(queue, list);
    onPublished?.(queue, list.length);
  }
}

export interface BatchOptions {
  onPublished?: (queue: string, count: number) => void;
  /** Only rows of a lower seq: those from it on are on offer, published from memory. */
  below?: string | null;
  /** Rows whose event is gone (deleted by hand: the retention keeps them), marked without a job. */
  onMissing?: (rows: { source: string; eventId: string }[]) => void;
}

/**
 * Publishes one batch of unpublished outbox rows, oldest first: addBulk per queue
 * with the deterministic jobId, then marks them published, all inside one
 * transaction whose row locks keep a second relay off the same rows. A crash
 * after addBulk re-adds the same jobIds next time, which BullMQ ignores. The job's
 * data is read from the event (rows written before schema version 3 carry a copy).
 * Returns how many rows it took (0: none was left).
 */
export async function publishBatch(
  store: Store,
  publisher: Publisher,
  batchSize: number,
  opts: BatchOptions = {},
): Promise<number> {
  const { onPublished, below = null } = opts;
  const s = quoteSchema(store.schema);
  // During a catch-up the outbox grows faster than its statistics: a fresh table looks
  // empty to the planner, which then reads the whole backlog and sorts it, on every
  // batch. The partial index already yields the rows in seq order; no sort is needed.
  return inTransaction(store, 'BEGIN; SET LOCAL enable_sort = off', async (db) => {
    // Both relay statements open with a comment naming them, for whoever reads pg_stat_activity.
    const { rows } = await db.query<OutboxRow>(
      `/* relay: outbox */ SELECT o.seq, o.source, o.event_id, o.queue, o.job_name, ${outboxJobDataSql('o', 'e')} AS data
         FROM ${s}.outbox o LEFT JOIN ${s}.events e ON e.source = o.source AND e.id = o.event_id
        WHERE o.published_at IS NULL AND ($2::bigint IS NULL OR o.seq < $2::bigint)
        ORDER BY o.seq LIMIT $1 FOR UPDATE OF o SKIP LOCKED`,
      [batchSize, below],
    );
    // The retention keeps every event with an unpublished row; a row without one has no job to give.
    const missing = rows.filter((row) => row.data === null);
    if (missing.length > 0) opts.onMissing?.(missing.map((r) => ({ source: r.source, eventId: r.event_id })));
    const jobs = rows.flatMap((row) =>
      row.data === null
        ? []
        : [
            {
              queue: row.queue,
              job: { name: row.job_name, jobId: jobIdFor(row.source, row.event_id), data: row.data },
            },
          ],
    );
    await addInOrder(publisher, jobs, onPublished);
    if (rows.length > 0) {
      await db.query(`UPDATE ${s}.outbox SET published_at = now() WHERE seq = ANY($1::bigint[])`, [
        rows.map((r) => r.seq),
      ]);
    }
    return rows.length;
  });
}

/**
 * Publishes outbox rows the worker has just committed, from the events it holds: it
 * marks them published (those still unpublished: a relay elsewhere may have taken
 * some) and adds their jobs, in one transaction, so that the outbox is not read back.
 * Returns how many it published.
 */
export async function publishCommitted(
  store: Store,
  publisher: Publisher,
  entries: readonly OutboxEntry[],
  onPublished?: (queue: string, count: number) => void,
): Promise<number> {
  const s = quoteSchema(store.schema);
  return inTransaction(store, 'BEGIN', async (db) => {
    // Row locks as the batch path takes them: a row another relay holds is waited for, then skipped.
    const { rows } = await db.query<{ seq: string }>(
      `/* relay: committed */ UPDATE ${s}.outbox SET published_at = now()
        WHERE seq = ANY($1::bigint[]) AND published_at IS NULL RETURNING seq`,
      [entries.map((e) => e.seq)],
    );
    const open = new Set(rows.map((r) => r.seq));
    const jobs = entries
      .filter((e) => open.has(e.seq))
      .map((e) => ({
        queue: e.queue,
        job: { name: e.jobName, jobId: jobIdFor(e.source, e.event.id), data: jobData(e.source, e.event) },
      }));
    await addInOrder(publisher, jobs, onPublished);
    return jobs.length;
  });
}

/** Unpublished outbox rows. */
export async function outboxBacklog(store: Store): Promise<number> {
  const { rows } = await store.pool.query<{ n: string }>(
    `SELECT count(*) AS n FROM ${table(store)} WHERE published_at IS NULL`,
  );
  return Number(rows[0]?.n ?? 0);
}

/** Deletes published rows older than the retention (kept until then for `requeue`). */
export async function pruneOutbox(store: Store, retentionHours: number): Promise<number> {
  const res = await store.pool.query(
    `DELETE FROM ${table(store)} WHERE published_at < now() - make_interval(hours => $1)`,
    [retentionHours],
  );
  return res.rowCount ?? 0;
}

export interface Relay {
  /** New outbox rows were committed that nobody offers: look at the outbox soon. */
  kick(): void;
  /**
   * Outbox rows just committed, with their events: published from memory, without
   * reading the outbox back. Past a bound of rows waiting, they are left to the outbox.
   */
  offer(entries: readonly OutboxEntry[]): void;
  /**
   * Resolves once there is room for another offer: a catch-up waits here rather than
   * run ahead of Redis and push the rows it stores into the outbox's slow path. Never
   * waits while the relay is failing (Redis down: storing goes on) or stopped.
   */
  ready(): Promise<void>;
  /** Resolves once every row committed before the call is published; rejects after `drainAttempts` failures in a row. */
  drain(): Promise<void>;
  /** Stops the loop after the batch in hand. */
  stop(): Promise<void>;
  /** The last error, while failures go on; null after a success. */
  readonly lastError: unknown;
}

/**
 * The relay loop: publishes what it is offered, reads the outbox when kicked (or a
 * sweep is due, or after a failure) until it finds no full batch, and backs off
 * while Redis is down. Storing waits for it only through ready(), while it keeps up
 * and memory is full; never while Redis fails. The outbox comes first, so rows left
 * behind are published before newer ones (rows on offer excepted: they stay on the
 * memory path).
 */
export function startRelay(opts: RelayOptions): Relay {
  const batchSize = opts.batchSize ?? 1000;
  const drainAttempts = opts.drainAttempts ?? 5;
  const maxBackoff = opts.maxBackoffMs ?? 30_000;
  const sweepMs = opts.sweepMs ?? 60_000;
  const sleep = opts.sleep ?? defaultSleep;
  const log = opts.logger.child({ module: 'relay' });
  const stopper = new AbortController();
  // What may wait in memory: beyond it (Redis slower than Postgres) the outbox holds the rest.
  const maxOffered = opts.maxOffered ?? 4 * batchSize;
  let wake: AbortController = new AbortController();
  let kicked = false;
  let offered: OutboxEntry[] = [];
  let roomWaiters: (() => void)[] = [];
  const roomMade = (): void => {
    const woken = roomWaiters;
    roomWaiters = [];
    for (const resolve of woken) resolve();
  };
  let generation = 0;
  let failures = 0;
  let lastError: unknown = null;
  /**
   * A drain() call: `mark` is the highest outbox seq committed when it was made. It is
   * settled once no unpublished row is at or below it, or once a read of the outbox
   * started after it finds it empty. Many sources share one relay, so the outbox is
   * seldom empty while they run: waiting for empty would hold each source's turn
   * until all paused.
   */
  type Waiter = {
    generation: number;
    mark: bigint;
    resolve: () => void;
    reject: (err: unknown) => void;
  };
  let waiters: Waiter[] = [];

  /** Resolves (or, given an error, rejects) the drain() calls that `due` picks. */
  const settle = (due: (w: Waiter) => boolean, err?: unknown): void => {
    const settled = waiters.filter(due);
    waiters = waiters.filter((w) => !due(w));
    for (const w of settled) {
      if (err === undefined) w.resolve();
      else w.reject(err);
    }
  };
  /** The lowest seq on offer (concurrent commits can offer out of seq order); null when none is. */
  const lowestOffered = (): string | null => {
    let low: bigint | null = null;
    for (const e of offered) if (low === null || BigInt(e.seq) < low) low = BigInt(e.seq);
    return low === null ? null : low.toString();
  };
  const rouse = (): void => {
    wake.abort();
    wake = new AbortController();
  };

  /** One step: a batch read from the outbox when kicked, else what was offered. */
  const step = async (gen: number): Promise<void> => {
    if (kicked) {
      // Consume the kick before the batch: a kick that lands while it runs asks for one more.
      kicked = false;
      // Rows on offer are left to the memory path: a source's start (a kick) while others
      // commit would otherwise read their rows back the slow way.
      const below = lowestOffered();
      const n = await publishBatch(opts.store, opts.publisher, batchSize, {
        below,
        ...(opts.onPublished ? { onPublished: opts.onPublished } : {}),
        onMissing: (rows) =>
          log.error(
            { rows: rows.length, first: rows[0] },
            'outbox rows whose event is gone were marked published without a job: the events were deleted outside feedsync',
          ),
      });
      // Empty only when nothing was held back for the memory path.
      if (n === 0 && below === null) settle((w) => w.generation < gen);
      // A full batch: more may be waiting. A short one took every row committed before it
      // that no other relay held; rows committed since are offered or kicked.
      if (n === batchSize) kicked = true;
    } else {
      const entries = offered.splice(0, batchSize);
      roomMade();
      await publishCommitted(opts.store, opts.publisher, entries, opts.onPublished);
    }
    if (waiters.length > 0 && !kicked) {
      const low = await lowestUnpublished(opts.store);
      settle((w) => low === null || low > w.mark);
      // Rows that nobody offers (a crash's, another process's): read the outbox for them.
      if (waiters.length > 0 && offered.length === 0) kicked = true;
    }
  };

  const loop = async (): Promise<void> => {
    while (!stopper.signal.aborted) {
      if (!kicked && offered.length === 0) {
        // A sleep that ends by itself (no kick, no stop) is a sweep: an empty outbox costs one index look-up.
        await sleep(sweepMs, AbortSignal.any([stopper.signal, wake.signal])).then(
          () => {
            kicked = true;
          },
          () => {},
        );
        continue;
      }
      const gen = ++generation;
      try {
        await step(gen);
        if (failures > 0) log.info({ failures }, 'outbox relay recovered');
        failures = 0;
        lastError = null;
      } catch (err) {
        // Whatever was offered is in the outbox: the retry reads it from there.
        offered = [];
        roomMade();
        kicked = true;
        failures++;
        lastError = err;
        log.warn({ err, failures }, 'outbox relay failed; retrying with backoff');
        // Waiting cannot fix a configuration error (a cluster and a prefix without a hash tag).
        if (failures >= drainAttempts || err instanceof ConfigError) settle(() => true, err);
        const backoff = Math.min(maxBackoff, 250 * 2 ** failures);
        await sleep(Math.floor(backoff / 2 + (Math.random() * backoff) / 2), stopper.signal).catch(() => {});
      }
    }
  };
  const running = loop();

  return {
    kick() {
      kicked = true;
      rouse();
    },
    offer(entries) {
      if (entries.length === 0) return;
      // While the outbox is to be read anyway, or memory is full (an offer that did not wait
      // for ready()), the read takes these too.
      if (kicked || offered.length >= maxOffered) this.kick();
      else {
        offered.push(...entries);
        rouse();
      }
    },
    ready() {
      if (offered.length < maxOffered || lastError !== null || stopper.signal.aborted)
        return Promise.resolve();
      return new Promise<void>((resolve) => roomWaiters.push(resolve));
    },
    async drain() {
      if (stopper.signal.aborted) throw new Error('the relay is stopped');
      // Nothing committed yet: every seq is at least 1, so the next batch settles it.
      const mark = (await highestSeq(opts.store)) ?? 0n;
      if (stopper.signal.aborted) throw new Error('the relay is stopped');
      return new Promise<void>((resolve, reject) => {
        waiters.push({ generation, mark, resolve, reject });
        // Rows on offer are published from memory first; the step after them looks at the rest.
        if (offered.length === 0) this.kick();
        else rouse();
      });
    },
    async stop() {
      stopper.abort();
      roomMade();
      await running;
      settle(() => true, new Error('the relay stopped before the outbox was drained'));
    },
    get lastError() {
      return lastError;
    },
  };
}

/** The highest seq committed so far (null: an empty outbox); an index look-up. */
async function highestSeq(store: Store): Promise<bigint | null> {
  const { rows } = await store.pool.query<{ seq: string | null }>(
    `SELECT max(seq) AS seq FROM ${table(store)}`,
  );
  return rows[0]?.seq == null ? null : BigInt(rows[0].seq);
}

/** The lowest seq not yet published (null: none); an index look-up on the unpublished rows. */
async function lowestUnpublished(store: Store): Promise<bigint | null> {
  const { rows } = await store.pool.query<{ seq: string | null }>(
    `SELECT min(seq) AS seq FROM ${table(store)} WHERE published_at IS NULL`,
  );
  return rows[0]?.seq == null ? null : BigInt(rows[0].seq);
}

/** The outbox's qualified name; the schema is a checked lowercase identifier. */
function table(store: Store): string {
  return `"${store.schema}".outbox`;
}
