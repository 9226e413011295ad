import { inTransaction, type Store } from '../db.js';
import { type JobData, outboxJobDataBytesSql, outboxJobDataSql } from '../event-json.js';

/** An unpublished outbox row, with its job's data built from the stored event. */
export interface OutboxRow {
  seq: string;
  source: string;
  eventId: string;
  queue: string;
  jobName: string;
  /** Null when the event is gone (deleted outside feedsync): the row has no job to give. */
  data: JobData | null;
  /** When the row was committed, in ms since the epoch (Postgres's clock). */
  committedAt: number;
  /** About the length of its job data as JSON (store/event-json.ts, `outboxJobDataBytesSql`). */
  bytes: number;
}

/**
 * What the relay needs of the outbox table, and nothing else: every statement is
 * one round trip in a transaction of its own, so no Postgres session or row lock
 * is held while Redis is asked for anything.
 */
export interface Outbox {
  /**
   * Up to `limit` unpublished rows, oldest first, leaving out the seqs in `skip`, and
   * only as many as start under `maxBytes` of job data: at least one, and the rows
   * stop at the first that reaches the budget.
   */
  unpublished(limit: number, skip: readonly string[], maxBytes: number): Promise<OutboxRow[]>;
  /** Of `seqs`, those still unpublished (another relay may have published some). */
  unpublishedOf(seqs: readonly string[]): Promise<string[]>;
  /** Marks rows published; returns the seqs that were still unpublished. */
  markPublished(seqs: readonly string[]): Promise<string[]>;
  /** The highest seq committed so far (null: an empty outbox). */
  highestSeq(): Promise<bigint | null>;
  /** The lowest seq not yet published (null: none). */
  lowestUnpublished(): Promise<bigint | null>;
}

interface RowText {
  seq: string;
  source: string;
  event_id: string;
  queue: string;
  job_name: string;
  data: JobData | null;
  committed_ms: string;
  bytes: number;
}

/** The outbox of `store`'s schema (a checked lowercase identifier). */
export function pgOutbox(store: Store): Outbox {
  const t = outboxTable(store);
  const events = `"${store.schema}".events`;
  return {
    async unpublished(limit, skip, maxBytes) {
      // During a catch-up the outbox grows faster than its statistics: a fresh table looks
      // empty to the planner, which then reads the whole backlog and sorts it. The partial
      // index already yields the rows in seq order; no sort is needed. The statement opens
      // with a comment naming it, for whoever reads pg_stat_activity.
      // The head's rows are measured first (their sizes, not their data); only the rows
      // that start under the budget have their job data built and sent: a read of large
      // events holds what the budget says in the worker, not `limit` of them.
      const rows = await inTransaction(
        store,
        async (client) => {
          const res = await client.query<RowText>(
            `/* relay: outbox */ WITH head AS (
             SELECT o.seq, ${outboxJobDataBytesSql('o', 'e')}::int AS bytes
               FROM ${t} o LEFT JOIN ${events} e ON e.source = o.source AND e.id = o.event_id
              WHERE o.published_at IS NULL AND o.seq <> ALL($2::bigint[])
              ORDER BY o.seq LIMIT $1
           ), sized AS (
             SELECT seq, bytes, sum(bytes) OVER (ORDER BY seq) - bytes AS before FROM head
           )
           SELECT o.seq, o.source, o.event_id, o.queue, o.job_name,
                  ${outboxJobDataSql('o', 'e')} AS data,
                  (extract(epoch FROM o.created_at) * 1000)::bigint AS committed_ms, s.bytes
             FROM sized s JOIN ${t} o ON o.seq = s.seq
             LEFT JOIN ${events} e ON e.source = o.source AND e.id = o.event_id
            WHERE s.before < greatest($3, 1)
            ORDER BY o.seq`,
            [limit, skip, maxBytes],
          );
          return res.rows;
        },
        { enable_sort: 'off' },
      );
      return rows.map((r) => ({
        seq: r.seq,
        source: r.source,
        eventId: r.event_id,
        queue: r.queue,
        jobName: r.job_name,
        data: r.data,
        committedAt: Number(r.committed_ms),
        bytes: r.bytes,
      }));
    },
    async unpublishedOf(seqs) {
      if (seqs.length === 0) return [];
      const { rows } = await store.pool.query<{ seq: string }>(
        `/* relay: open */ SELECT seq FROM ${t} WHERE seq = ANY($1::bigint[]) AND published_at IS NULL`,
        [seqs],
      );
      return rows.map((r) => r.seq);
    },
    async markPublished(seqs) {
      if (seqs.length === 0) return [];
      const { rows } = await store.pool.query<{ seq: string }>(
        `/* relay: mark */ UPDATE ${t} SET published_at = now()
          WHERE seq = ANY($1::bigint[]) AND published_at IS NULL RETURNING seq`,
        [seqs],
      );
      return rows.map((r) => r.seq);
    },
    async highestSeq() {
      const { rows } = await store.pool.query<{ seq: string | null }>(`SELECT max(seq) AS seq FROM ${t}`);
      return rows[0]?.seq == null ? null : BigInt(rows[0].seq);
    },
    async lowestUnpublished() {
      const { rows } = await store.pool.query<{ seq: string | null }>(
        `SELECT min(seq) AS seq FROM ${t} WHERE published_at IS NULL`,
      );
      return rows[0]?.seq == null ? null : BigInt(rows[0].seq);
    },
  };
}

/** The outbox's qualified name; the schema is a checked lowercase identifier. */
export function outboxTable(store: Store): string {
  return `"${store.schema}".outbox`;
}
