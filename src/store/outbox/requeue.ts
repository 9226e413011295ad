import type { Store } from '../db.js';
import { type JobData, outboxJobDataSql } from '../event-json.js';
import { outboxTable } from './relay.js';

/** What requeue re-drives: a source's published rows after `afterSeq`, published at or after `publishedFrom`. */
export interface PublishedRange {
  source: string;
  /** Int8 as text. */
  afterSeq: string;
  publishedFrom: Date;
}

/** A published row with its job's data built from the stored event. */
export interface PublishedRow {
  seq: string;
  eventId: string;
  queue: string;
  jobName: string;
  /** Null when the event is gone: the row has no job to give. */
  data: JobData | null;
}

/** Rows of one queue in a range, as a dry run counts them. */
export interface QueueCount {
  queue: string;
  /** Rows with job data. */
  n: number;
  /** Rows whose event is gone. */
  gone: number;
  /** The lowest seq of the queue's rows (int8 as text). */
  first: string;
}

/** The published rows kept of a source, and its rows not yet published. */
export interface KeptRows {
  /** When the oldest kept published row was published; null when none is kept. */
  oldestPublished: Date | null;
  unpublished: number;
}

// The job data is the event's (rows before schema version 3 carry a copy); a row whose
// event is gone has none.
const DATA = outboxJobDataSql('o', 'e');
const WHERE = 'o.source = $1 AND o.published_at IS NOT NULL AND o.seq > $2::bigint AND o.published_at >= $3';

function fromRows(store: Store): string {
  return `${outboxTable(store)} o LEFT JOIN "${store.schema}".events e ON e.source = o.source AND e.id = o.event_id`;
}

function params(range: PublishedRange): unknown[] {
  return [range.source, range.afterSeq, range.publishedFrom];
}

/** Of a source's rows: when the oldest kept published one was published, and how many wait. */
export async function keptRowsOf(store: Store, source: string): Promise<KeptRows> {
  const { rows } = await store.pool.query<{ oldest: Date | null; unpublished: string }>(
    `SELECT min(published_at) AS oldest, count(*) FILTER (WHERE published_at IS NULL) AS unpublished
       FROM ${outboxTable(store)} WHERE source = $1`,
    [source],
  );
  return { oldestPublished: rows[0]?.oldest ?? null, unpublished: Number(rows[0]?.unpublished ?? 0) };
}

/** Up to `limit` rows of the range, in seq order. */
export async function publishedRows(
  store: Store,
  range: PublishedRange,
  limit: number,
): Promise<PublishedRow[]> {
  const { rows } = await store.pool.query<{
    seq: string;
    event_id: string;
    queue: string;
    job_name: string;
    data: JobData | null;
  }>(
    `SELECT o.seq, o.event_id, o.queue, o.job_name, ${DATA} AS data
       FROM ${fromRows(store)} WHERE ${WHERE} ORDER BY o.seq LIMIT $4`,
    [...params(range), limit],
  );
  return rows.map((r) => ({
    seq: r.seq,
    eventId: r.event_id,
    queue: r.queue,
    jobName: r.job_name,
    data: r.data,
  }));
}

/** The range's rows per queue: those with job data, those without, and the first seq. */
export async function publishedCountsByQueue(store: Store, range: PublishedRange): Promise<QueueCount[]> {
  const { rows } = await store.pool.query<{ queue: string; n: string; gone: string; first: string }>(
    `SELECT o.queue, count(*) FILTER (WHERE ${DATA} IS NOT NULL) AS n,
            count(*) FILTER (WHERE ${DATA} IS NULL) AS gone, min(o.seq) AS first
       FROM ${fromRows(store)} WHERE ${WHERE} GROUP BY o.queue`,
    params(range),
  );
  return rows.map((r) => ({ queue: r.queue, n: Number(r.n), gone: Number(r.gone), first: r.first }));
}

/** The event ids of the range's first `limit` rows whose event is gone, in seq order. */
export async function goneEventIds(store: Store, range: PublishedRange, limit: number): Promise<string[]> {
  const { rows } = await store.pool.query<{ event_id: string }>(
    `SELECT o.event_id FROM ${fromRows(store)}
      WHERE ${WHERE} AND ${DATA} IS NULL ORDER BY o.seq LIMIT $4`,
    [...params(range), limit],
  );
  return rows.map((r) => r.event_id);
}

/**
 * The seq of the event's own row; null when it has none (no job for its type, or pruned).
 * An event stored again (reconcile after a manual delete) has two rows: the first is
 * where `--since` starts, or the rows between them would be skipped.
 */
export async function outboxSeqOf(store: Store, source: string, eventId: string): Promise<string | null> {
  const { rows } = await store.pool.query<{ seq: string | null }>(
    `SELECT min(seq) AS seq FROM ${outboxTable(store)} WHERE source = $1 AND event_id = $2`,
    [source, eventId],
  );
  return rows[0]?.seq ?? null;
}

/** The lowest seq of the source's rows committed at or after `since`; null when none is. */
export async function firstSeqSince(store: Store, source: string, since: Date): Promise<string | null> {
  const { rows } = await store.pool.query<{ seq: string | null }>(
    `SELECT min(seq) AS seq FROM ${outboxTable(store)} WHERE source = $1 AND created_at >= $2`,
    [source, since],
  );
  return rows[0]?.seq ?? null;
}
