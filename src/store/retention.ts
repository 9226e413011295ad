import { defaultSleep } from '../api/retry.js';
import type { Logger } from '../logger.js';
import { quoteSchema, type Store } from './db.js';
import { retentionCutoff } from './retention-guard.js';

export interface PruneOptions {
  source: string;
  /** EVENTS_RETENTION_DAYS: rows older than this many days go. */
  days: number;
  /** Rows per DELETE, each its own short transaction. Default 1000. */
  batchSize?: number;
  /** No batch starts after this long, so a run's tail stays bounded. Default 5000 ms. */
  budgetMs?: number;
  /**
   * Pause after each batch, as a share of the time the batch took: a concurrent
   * catch-up gets the disk and the WAL in between. Default 1 (busy half the time).
   */
  restShare?: number;
  /** Stops before the next batch (SIGTERM: the run ends promptly). */
  signal?: AbortSignal;
  now?: number;
  sleep?: (ms: number) => Promise<void>;
}

export interface PruneResult {
  /** Events deleted (created_at before the cutoff). */
  events: number;
  /** Quarantined items deleted (received before the cutoff). */
  quarantine: number;
  /** Recorded conflicts deleted (received before the cutoff). */
  conflicts: number;
  /** False when the budget ran out with old rows left: the next run goes on. */
  done: boolean;
}

/**
 * What each table keeps: events by the time the service created them (the index on
 * `(source, created_at)` finds the oldest first); quarantine and conflicts by the time
 * they arrived (small tables, read without an index): a conflict outlives the kept
 * version it differs from by at most the retention, and an operator who has not
 * looked at either in that time will not. `email_status` is never pruned: it is the
 * projection a consumer reads, one row per email. An event whose outbox row is not
 * published yet stays: the relay reads the job's data from it (Redis down for longer
 * than the retention). Outbox rows are not touched here: published ones have their
 * own retention (OUTBOX_RETENTION_HOURS).
 */
const TARGETS = [
  { table: 'events', time: 'created_at', ordered: true, keep: 'unpublished' },
  { table: 'quarantine', time: 'received_at', ordered: false, keep: null },
  { table: 'conflicts', time: 'received_at', ordered: false, keep: null },
] as const;

/**
 * Deletes one source's rows older than the retention, a small batch per statement
 * (row locks on old rows only, held for one batch), until none is left or the time
 * budget is spent. Within a call each batch starts where the previous one ended,
 * so it never walks the index entries it has just deleted.
 */
export async function pruneExpired(store: Store, opts: PruneOptions): Promise<PruneResult> {
  const batchSize = opts.batchSize ?? 1000;
  const budgetMs = opts.budgetMs ?? 5000;
  const restShare = opts.restShare ?? 1;
  const sleep = opts.sleep ?? defaultSleep;
  const cutoff = retentionCutoff(opts.days, opts.now);
  const deadline = performance.now() + budgetMs;
  const s = quoteSchema(store.schema);
  const result: PruneResult = { events: 0, quarantine: 0, conflicts: 0, done: false };

  for (const { table, time, ordered, keep } of TARGETS) {
    const kept =
      keep === 'unpublished'
        ? `AND NOT EXISTS (SELECT FROM ${s}.outbox o WHERE o.source = t.source AND o.event_id = t.id AND o.published_at IS NULL)`
        : '';
    let from = new Date(0);
    // Bounded: every round deletes a full batch of rows (finite) or ends the table.
    for (;;) {
      if (performance.now() >= deadline || opts.signal?.aborted) return result;
      const started = performance.now();
      const { rows } = await store.pool.query<{ n: string; last: Date | null }>(
        `WITH gone AS (
           DELETE FROM ${s}.${table} WHERE ctid = ANY(ARRAY(
             SELECT ctid FROM ${s}.${table} t
              WHERE source = $1 AND ${time} >= $2 AND ${time} < $3 ${kept}
              ${ordered ? `ORDER BY ${time}` : ''} LIMIT $4))
           RETURNING ${time} AS t)
         SELECT count(*) AS n, max(t) AS last FROM gone`,
        [opts.source, from, cutoff, batchSize],
      );
      const n = Number(rows[0]?.n ?? 0);
      result[table] += n;
      if (n < batchSize) break;
      if (ordered && rows[0]?.last) from = rows[0].last;
      await sleep((performance.now() - started) * restShare);
    }
  }
  result.done = true;
  return result;
}

/**
 * The end of a run: prunes what the retention lets go, logs what went. A failure is
 * logged, not thrown: the run's events are stored, and the next run prunes again.
 */
export async function pruneAfterRun(
  store: Store,
  opts: PruneOptions & { logger: Logger },
): Promise<PruneResult | null> {
  const log = opts.logger.child({ module: 'retention' });
  try {
    const result = await pruneExpired(store, opts);
    if (result.events + result.quarantine + result.conflicts > 0 || !result.done) {
      log.info(
        { ...result, source: opts.source, days: opts.days },
        'pruned rows older than EVENTS_RETENTION_DAYS',
      );
    }
    return result;
  } catch (err) {
    log.warn({ err, source: opts.source }, 'pruning old events failed; the next run tries again');
    return null;
  }
}
