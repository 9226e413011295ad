import { ConfigError } from '../errors.js';
import { receivedAtOf } from '../store/cursor.js';
import type { Store } from '../store/db.js';
import {
  firstSeqSince,
  goneEventIds,
  keptRowsOf,
  outboxSeqOf,
  type PublishedRange,
  publishedCountsByQueue,
  publishedRows,
} from '../store/outbox.js';
import { assertEventWithinRetention, assertWithinRetention } from '../store/retention-guard.js';
import type { JobToAdd, Publisher } from './publisher.js';
import { jobIdFor } from './routes.js';
import type { RequeueSince } from './since.js';

export type { RequeueSince } from './since.js';

/** requeue's default, in one place: RequeueOptions names it. */
export const REQUEUE_DEFAULTS = Object.freeze({
  /** Rows per round: as the relay's batches, a thousand jobs share one addBulk round trip per queue. */
  batchSize: 1000,
});

export interface RequeueOptions {
  source: string;
  since: RequeueSince;
  /** OUTBOX_RETENTION_HOURS: published rows older than this may have been pruned. */
  retentionHours: number;
  /** EVENTS_RETENTION_DAYS: a start older than this is refused (exit 2); null: no limit. */
  eventsRetentionDays?: number | null;
  /** Count what would be re-driven; add nothing. */
  dryRun?: boolean;
  /** Outbox rows per round of addBulk. Default: REQUEUE_DEFAULTS.batchSize. */
  batchSize?: number;
  /** Called after each addBulk, for progress output. */
  onBatch?: (queue: string, count: number) => void;
  now?: number;
}

export interface RequeueResult {
  /** Published rows re-driven (with dryRun: that would be). */
  requeued: number;
  /** The same, per queue. */
  byQueue: Record<string, number>;
  /** Of those, jobs Redis did not hold and now does, each job id once (0 on a dry run). */
  added: number;
  /** Of those, jobs Redis still held (any state): left as they were. */
  alreadyPresent: number;
  /**
   * Of those, rows whose job id another row of the same round carries (an event stored
   * again after its row was deleted by hand): one job. requeued = added + alreadyPresent + sameJob.
   */
  sameJob: number;
  /** The outbox seq the requeue started from; null when no row matched. */
  fromSeq: string | null;
  /** The oldest published row still kept for this source; null when none is. */
  oldestKept: Date | null;
  /**
   * True when the requested start lies before the retention window and before the
   * oldest kept row: jobs published before that row were pruned and cannot be re-driven.
   */
  predatesRetention: boolean;
  /** Rows of this source not yet published: the relay of the next sync adds them, not requeue. */
  unpublished: number;
  /**
   * Published rows in the range whose event is no longer stored, so they have no job
   * data to re-drive (a dry run counts them the same way): not in `requeued`.
   */
  unavailable: number;
  /** The event ids of the first of those (at most 20, each cut to 200 characters). */
  unavailableIds: string[];
}

/** How many ids of rows that cannot be re-driven a result names. */
const UNAVAILABLE_IDS_SHOWN = 20;

/**
 * Re-drives published outbox rows into BullMQ with their deterministic jobIds, in
 * seq order (for when Redis lost its data: a flush, a failover, an eviction).
 * A job still kept in Redis is left as it is, so running it twice adds nothing new.
 * Only rows kept by the retention (OUTBOX_RETENTION_HOURS) can be re-driven.
 */
export async function requeue(
  store: Store,
  publisher: Pick<Publisher, 'addBulk' | 'present'>,
  opts: RequeueOptions,
): Promise<RequeueResult> {
  const batchSize = opts.batchSize ?? REQUEUE_DEFAULTS.batchSize;
  const now = opts.now ?? Date.now();
  const retentionDays = opts.eventsRetentionDays ?? null;
  if ('time' in opts.since) assertWithinRetention('--since', opts.since.time, retentionDays, now);
  else
    await assertEventWithinRetention(store, opts.source, opts.since.eventId, '--since', retentionDays, now);
  const start = await resolveStart(store, opts);
  const kept = await keptRowsOf(store, opts.source);
  const oldestKept = kept.oldestPublished;
  const retentionStart = now - opts.retentionHours * 3_600_000;
  const predatesRetention =
    start.time !== null &&
    start.time.getTime() < retentionStart &&
    (oldestKept === null || start.time < oldestKept);
  const result: RequeueResult = {
    requeued: 0,
    byQueue: {},
    added: 0,
    alreadyPresent: 0,
    sameJob: 0,
    fromSeq: null,
    oldestKept,
    predatesRetention,
    unpublished: kept.unpublished,
    unavailable: 0,
    unavailableIds: [],
  };
  // Rows after `seq`, published, and (for a time) published at or after it.
  const range: PublishedRange = {
    source: opts.source,
    afterSeq: start.afterSeq,
    publishedFrom: start.publishedFrom ?? new Date(0),
  };
  if (opts.dryRun) {
    // The same rows and the same test for an event that is gone as the real run's.
    for (const row of await publishedCountsByQueue(store, range)) {
      if (row.n > 0) result.byQueue[row.queue] = row.n;
      result.requeued += row.n;
      result.unavailable += row.gone;
      if (result.fromSeq === null || BigInt(row.first) < BigInt(result.fromSeq)) result.fromSeq = row.first;
    }
    if (result.unavailable > 0) {
      const gone = await goneEventIds(store, range, UNAVAILABLE_IDS_SHOWN);
      result.unavailableIds = gone.map((id) => id.slice(0, 200));
    }
    return result;
  }

  let after = start.afterSeq;
  // Bounded: each round moves `after` forward past at least one row, and rows are finite.
  for (;;) {
    // The retention keeps every event a kept row needs; a row whose event is gone all the same
    // (deleted by hand, or pruned by an older build) has no job to give: counted and named,
    // never skipped quietly.
    const rows = await publishedRows(store, { ...range, afterSeq: after }, batchSize);
    if (rows.length === 0) break;
    result.fromSeq ??= rows[0]!.seq;
    const byQueue = new Map<string, JobToAdd[]>();
    for (const row of rows) {
      if (row.data === null) {
        result.unavailable++;
        if (result.unavailableIds.length < UNAVAILABLE_IDS_SHOWN) {
          result.unavailableIds.push(row.eventId.slice(0, 200));
        }
        continue;
      }
      const jobs = byQueue.get(row.queue) ?? [];
      byQueue.set(row.queue, jobs);
      jobs.push({ name: row.jobName, jobId: jobIdFor(opts.source, row.eventId), data: row.data });
    }
    for (const [queue, jobs] of byQueue) {
      // Asked before adding, so the count is what this call changed; every job is still
      // added, so one removed meanwhile (its retention ran out) comes back all the same.
      const present = await publisher.present(
        queue,
        jobs.map((j) => j.jobId),
      );
      await publisher.addBulk(queue, jobs);
      // Two rows of one event (stored again after its row was deleted by hand) are one job.
      const unique = new Set(jobs.map((j) => j.jobId)).size;
      result.alreadyPresent += present.size;
      result.added += unique - present.size;
      result.sameJob += jobs.length - unique;
      result.byQueue[queue] = (result.byQueue[queue] ?? 0) + jobs.length;
      result.requeued += jobs.length;
      opts.onBatch?.(queue, jobs.length);
    }
    after = rows[rows.length - 1]!.seq;
    if (rows.length < batchSize) break;
  }
  return result;
}

interface Start {
  /** Rows with a larger seq qualify. */
  afterSeq: string;
  /** Rows published before this do not qualify (a time given). */
  publishedFrom: Date | null;
  /** The moment the start stands for, to compare with the retention; null when unknown. */
  time: Date | null;
}

async function resolveStart(store: Store, opts: RequeueOptions): Promise<Start> {
  if ('time' in opts.since) {
    return { afterSeq: '0', publishedFrom: opts.since.time, time: opts.since.time };
  }
  const { eventId } = opts.since;
  const own = await outboxSeqOf(store, opts.source, eventId);
  // The event's own row is kept, so nothing it asks for was pruned.
  if (own !== null) return { afterSeq: (BigInt(own) - 1n).toString(), publishedFrom: null, time: null };
  // No row of its own (its type gets no job, or the row was pruned): start from the rows
  // stored with it or after it; they share its transaction's timestamp.
  const receivedAt = await receivedAtOf(store, opts.source, eventId);
  if (receivedAt === null) {
    throw new ConfigError(
      `source "${opts.source}" has no stored event ${JSON.stringify(eventId.slice(0, 200))}; pass a stored event id or a time`,
      'UNKNOWN_EVENT',
    );
  }
  const seq = await firstSeqSince(store, opts.source, receivedAt);
  return {
    afterSeq: seq ? (BigInt(seq) - 1n).toString() : '9223372036854775806',
    publishedFrom: null,
    time: receivedAt,
  };
}
