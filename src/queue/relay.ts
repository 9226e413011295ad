import { defaultSleep } from '../api/retry.js';
import { ConfigError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Store } from '../store/db.js';
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
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  onPublished?: (queue: string, count: number) => void;
}

interface OutboxRow {
  seq: string;
  source: string;
  event_id: string;
  queue: string;
  job_name: string;
  payload: unknown;
}

/**
 * Publishes one batch of unpublished outbox rows, oldest first: addBulk per queue
 * with the deterministic jobId, then marks them published, all inside one
 * transaction whose row locks keep a second relay off the same rows. A crash
 * after addBulk re-adds the same jobIds next time, which BullMQ ignores.
 * Returns how many rows it published (0: the outbox is empty).
 */
export async function publishBatch(
  store: Store,
  publisher: Publisher,
  batchSize: number,
  onPublished?: (queue: string, count: number) => void,
): Promise<number> {
  const client = await store.pool.connect();
  // The transaction stays open while Redis answers; if Postgres ends the session
  // meanwhile, a checked-out client without a listener would crash the process.
  let broken: Error | undefined;
  const onError = (err: Error): void => {
    broken = err;
  };
  client.on('error', onError);
  try {
    // During a catch-up the outbox grows faster than its statistics: a fresh table looks
    // empty to the planner, which then reads the whole backlog and sorts it, on every
    // batch. The partial index already yields the rows in seq order; no sort is needed.
    await client.query('BEGIN; SET LOCAL enable_sort = off');
    const { rows } = await client.query<OutboxRow>(
      `SELECT seq, source, event_id, queue, job_name, payload FROM ${table(store)}
        WHERE published_at IS NULL ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED`,
      [batchSize],
    );
    const byQueue = new Map<string, JobToAdd[]>();
    for (const row of rows) {
      const jobs = byQueue.get(row.queue) ?? [];
      byQueue.set(row.queue, jobs);
      jobs.push({ name: row.job_name, jobId: jobIdFor(row.source, row.event_id), data: row.payload });
    }
    for (const [queue, jobs] of byQueue) {
      await publisher.addBulk(queue, jobs);
      onPublished?.(queue, jobs.length);
    }
    if (rows.length > 0) {
      await client.query(`UPDATE ${table(store)} SET published_at = now() WHERE seq = ANY($1::bigint[])`, [
        rows.map((r) => r.seq),
      ]);
    }
    await client.query('COMMIT');
    return rows.length;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw broken ?? err;
  } finally {
    client.off('error', onError);
    client.release(broken);
  }
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
  /** New outbox rows were committed: publish them soon. */
  kick(): void;
  /** Resolves once every row committed before the call is published; rejects after `drainAttempts` failures in a row. */
  drain(): Promise<void>;
  /** Stops the loop after the batch in hand. */
  stop(): Promise<void>;
  /** The last error, while failures go on; null after a success. */
  readonly lastError: unknown;
}

/**
 * The relay loop: publishes while there is a backlog, sleeps until kicked (or a
 * sweep is due), and backs off while Redis is down. Storing never waits for it.
 */
export function startRelay(opts: RelayOptions): Relay {
  const batchSize = opts.batchSize ?? 1000;
  const drainAttempts = opts.drainAttempts ?? 5;
  const maxBackoff = opts.maxBackoffMs ?? 30_000;
  const sweepMs = opts.sweepMs ?? 60_000;
  const sleep = opts.sleep ?? defaultSleep;
  const log = opts.logger.child({ module: 'relay' });
  const stopper = new AbortController();
  let wake: AbortController = new AbortController();
  let kicked = false;
  let generation = 0;
  let failures = 0;
  let lastError: unknown = null;
  /**
   * A drain() call: `mark` is the highest outbox seq committed when it was made. It is
   * settled once no unpublished row is at or below it, or once a batch started after it
   * finds the outbox empty. Many sources share one relay, so the outbox is seldom empty
   * while they run: waiting for empty would hold each source's turn until all paused.
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

  const loop = async (): Promise<void> => {
    while (!stopper.signal.aborted) {
      if (!kicked) {
        // A sleep that ends by itself (no kick, no stop) is a sweep: an empty outbox costs one index look-up.
        await sleep(sweepMs, AbortSignal.any([stopper.signal, wake.signal])).then(
          () => {
            kicked = true;
          },
          () => {},
        );
        continue;
      }
      // Consume the kick before the batch: a kick that lands while it runs asks for one more.
      kicked = false;
      const gen = ++generation;
      try {
        const n = await publishBatch(opts.store, opts.publisher, batchSize, opts.onPublished);
        if (failures > 0) log.info({ failures }, 'outbox relay recovered');
        failures = 0;
        lastError = null;
        if (n > 0) {
          kicked = true;
          if (waiters.length > 0) {
            const low = await lowestUnpublished(opts.store);
            settle((w) => low === null || low > w.mark);
          }
        } else settle((w) => w.generation < gen);
      } catch (err) {
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
      wake.abort();
      wake = new AbortController();
    },
    async drain() {
      if (stopper.signal.aborted) throw new Error('the relay is stopped');
      // Nothing committed yet: every seq is at least 1, so the next batch settles it.
      const mark = (await highestSeq(opts.store)) ?? 0n;
      if (stopper.signal.aborted) throw new Error('the relay is stopped');
      return new Promise<void>((resolve, reject) => {
        waiters.push({ generation, mark, resolve, reject });
        this.kick();
      });
    },
    async stop() {
      stopper.abort();
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
