import type { Logger } from '../logger.js';
import { defaultSleep } from '../sleep.js';
import { quoteSchema, type Store } from './db.js';
import { firstKeptPublishedCreatedAt } from './outbox.js';
import { eventsKeptMs } from './retention-guard.js';

/** The pruner's defaults, each in one place: PruneOptions names them. */
export const RETENTION_DEFAULTS = Object.freeze({
  /**
   * Rows per DELETE, each its own short transaction: row locks on old rows only, held
   * for one batch; measured beside a concurrent catch-up in docs/BENCHMARKS.md
   * (Retention under load).
   */
  batchSize: 1000,
  /**
   * Milliseconds, 5 s: a once run's exit, or a turn of the retention loop, waits no longer
   * for pruning; what is left goes in the next run.
   */
  budgetMs: 5000,
  /** A share of each batch's time, rested after it: 1 keeps the pruner busy half the time, and a concurrent catch-up gets the disk and the WAL in between. */
  restShare: 1,
});

export interface PruneOptions {
  /** EVENTS_RETENTION_DAYS: rows that arrived longer ago than this go (never sooner than eventsKeptMs allows). */
  days: number;
  /** OUTBOX_RETENTION_HOURS: an event is kept at least as long as the published rows requeue reads. */
  outboxHours: number;
  /** Rows per DELETE, each its own short transaction. Default: RETENTION_DEFAULTS.batchSize. */
  batchSize?: number;
  /** No batch starts after this long, in ms, so a run's tail stays bounded. Default: RETENTION_DEFAULTS.budgetMs. */
  budgetMs?: number;
  /**
   * Pause after each batch, as a share of the time the batch took: a concurrent
   * catch-up gets the disk and the WAL in between. Default: RETENTION_DEFAULTS.restShare.
   */
  restShare?: number;
  /** Stops before the next batch (SIGTERM: the run ends promptly). */
  signal?: AbortSignal;
  sleep?: (ms: number) => Promise<void>;
}

export interface PruneResult {
  /** Events deleted (arrived before the cutoff). */
  events: number;
  /** Quarantined items deleted (arrived before the cutoff). */
  quarantine: number;
  /** Recorded conflicts deleted (arrived before the cutoff). */
  conflicts: number;
  /** False when the budget ran out with old rows left: the next run goes on. */
  done: boolean;
}

/**
 * Every table keeps a row by the time it arrived (`received_at`, Postgres's own
 * clock), never by a date the feed sent: a `created_at` before 1970 or in 9999 can
 * neither keep a row for ever nor have it pruned the moment it lands. An event that
 * arrives already old is kept as long as a new one, so the feed or a webhook retry
 * serving it again within that time is a duplicate, not a new event.
 *
 * An event also stays while requeue may still need its data: while its outbox row
 * is unpublished (the relay reads it; Redis down for longer than the retention), and
 * while any published row as old as it is kept (OUTBOX_RETENTION_HOURS; a row past it
 * counts as gone, whether or not its own pruning, at most every five minutes, has run). The second
 * is told without an index from the outbox to its events: outbox rows are written in
 * the transaction of their events (`created_at` = the events' `received_at`) in seq
 * order, so no event that arrived after the oldest kept published row (less an hour
 * for transactions that overlap) is pruned.
 *
 * `email_status` is never pruned: it is the projection a consumer reads, one row
 * per email. Outbox rows are not touched here: published ones have their own
 * retention (pruneOutbox).
 */
const TARGETS = [
  { table: 'events', ordered: true },
  { table: 'quarantine', ordered: false },
  { table: 'conflicts', ordered: false },
] as const;

/**
 * The deleted events taken off their sources' counts (migrations/0010_source_counts.sql),
 * in the same statement. The rows are locked in the order of their names first: two
 * pruners at once (two replicas) then never wait on each other in a cycle.
 */
const UNCOUNT = (s: string): string => `
  , locked AS MATERIALIZED (
    SELECT source FROM ${s}.source_counts WHERE source IN (SELECT source FROM gone) ORDER BY source FOR UPDATE
  ), uncounted AS (
    UPDATE ${s}.source_counts c SET events_stored = greatest(0, c.events_stored - g.n)
    FROM (SELECT source, count(*) AS n FROM gone GROUP BY source) g
    WHERE c.source = g.source AND c.source IN (SELECT source FROM locked)
  )`;

/** Outbox rows of one transaction may take their seqs in another order than their `created_at`; this covers it. */
const SEQ_ORDER_SLACK_MS = 3_600_000;

/**
 * Deletes every source's rows older than the retention (a source no worker syncs any
 * more included), a small batch per statement (row locks on old rows only, held for
 * one batch; rows another pruner holds are skipped), until none is left or the time
 * budget is spent. Within a call each batch starts where the previous one ended, so
 * it never walks the index entries it has just deleted.
 */
export async function pruneExpired(store: Store, opts: PruneOptions): Promise<PruneResult> {
  const batchSize = opts.batchSize ?? RETENTION_DEFAULTS.batchSize;
  const budgetMs = opts.budgetMs ?? RETENTION_DEFAULTS.budgetMs;
  const restShare = opts.restShare ?? RETENTION_DEFAULTS.restShare;
  const sleep = opts.sleep ?? defaultSleep;
  const deadline = performance.now() + budgetMs;
  const s = quoteSchema(store.schema);
  const result: PruneResult = { events: 0, quarantine: 0, conflicts: 0, done: false };
  const keptMs = eventsKeptMs(opts.days, opts.outboxHours);

  const { rows: cut } = await store.pool.query<{ rows: Date }>(
    'SELECT now() - make_interval(secs => $1::float8 / 1000) AS rows',
    [keptMs],
  );
  const rowsCutoff = cut[0]!.rows;
  const keptRow = await firstKeptPublishedCreatedAt(store, opts.outboxHours);
  const eventsCutoff = new Date(
    Math.min(rowsCutoff.getTime(), keptRow ? keptRow.getTime() - SEQ_ORDER_SLACK_MS : Infinity),
  );
  for (const { table, ordered } of TARGETS) {
    const cutoff = ordered ? eventsCutoff : rowsCutoff;
    const kept = ordered
      ? `AND NOT EXISTS (SELECT FROM ${s}.outbox o WHERE o.source = t.source AND o.event_id = t.id AND o.published_at IS NULL)`
      : '';
    let from: Date | string = '-infinity';
    // Bounded: every round deletes a full batch of rows (finite) or ends the table.
    for (;;) {
      if (performance.now() >= deadline || opts.signal?.aborted) return result;
      const started = performance.now();
      const { rows }: { rows: { n: string; last: Date | null }[] } = await store.pool.query(
        `WITH gone AS (
           DELETE FROM ${s}.${table} WHERE ctid = ANY(ARRAY(
             SELECT ctid FROM ${s}.${table} t
              WHERE received_at >= $1 AND received_at < $2 ${kept}
              ${ordered ? 'ORDER BY received_at' : ''} LIMIT $3 FOR UPDATE SKIP LOCKED))
           RETURNING source, received_at)
         ${table === 'events' ? UNCOUNT(s) : ''}
         SELECT count(*) AS n, max(received_at) AS last FROM gone`,
        [from, cutoff, batchSize],
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
 * Prunes what the retention lets go and logs what went. A failure is logged, not
 * thrown: the events are stored, and the next round prunes again.
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
        { ...result, days: opts.days, keptHours: eventsKeptMs(opts.days, opts.outboxHours) / 3_600_000 },
        'pruned rows older than EVENTS_RETENTION_DAYS',
      );
    }
    return result;
  } catch (err) {
    log.warn({ err }, 'pruning old events failed; the next round tries again');
    return null;
  }
}
