import type { Store } from '../db.js';
import { outboxTable } from './relay.js';

/** Unpublished outbox rows. */
export async function outboxBacklog(store: Store): Promise<number> {
  const { rows } = await store.pool.query<{ n: string }>(
    `SELECT count(*) AS n FROM ${outboxTable(store)} WHERE published_at IS NULL`,
  );
  return Number(rows[0]?.n ?? 0);
}

/** Unpublished outbox rows per source, for the sources that have any. */
export async function outboxBacklogBySource(store: Store): Promise<Map<string, number>> {
  const { rows } = await store.pool.query<{ source: string; n: string }>(
    `SELECT source, count(*) AS n FROM ${outboxTable(store)} WHERE published_at IS NULL GROUP BY source`,
  );
  return new Map(rows.map((r) => [r.source, Number(r.n)]));
}

export interface OutboxSummary {
  /** Rows not yet published. */
  backlog: number;
  /** When the oldest of those was committed; null when none waits. */
  oldestUnpublished: Date | null;
  /** Published rows not pruned yet (kept for `requeue`). */
  publishedKept: number;
}

/** The whole outbox in one scan: what waits, since when, and what is kept for requeue. */
export async function outboxSummary(store: Store): Promise<OutboxSummary> {
  const { rows } = await store.pool.query<{ backlog: string; oldest: Date | null; kept: string }>(
    `SELECT count(*) FILTER (WHERE published_at IS NULL) AS backlog,
            min(created_at) FILTER (WHERE published_at IS NULL) AS oldest,
            count(*) FILTER (WHERE published_at IS NOT NULL) AS kept
       FROM ${outboxTable(store)}`,
  );
  return {
    backlog: Number(rows[0]?.backlog ?? 0),
    oldestUnpublished: rows[0]?.oldest ?? null,
    publishedKept: Number(rows[0]?.kept ?? 0),
  };
}

/**
 * The `created_at` of the first published row (in seq order) that the retention keeps,
 * published within `retentionHours`; null when none is. Retention keeps the events
 * that arrived after it (store/retention.ts says why).
 */
export async function firstKeptPublishedCreatedAt(
  store: Store,
  retentionHours: number,
): Promise<Date | null> {
  const { rows } = await store.pool.query<{ created_at: Date }>(
    `SELECT created_at FROM ${outboxTable(store)}
      WHERE published_at >= now() - make_interval(hours => $1)
      ORDER BY seq LIMIT 1`,
    [retentionHours],
  );
  return rows[0]?.created_at ?? null;
}

/** Deletes published rows older than the retention (kept until then for `requeue`). */
export async function pruneOutbox(store: Store, retentionHours: number): Promise<number> {
  const res = await store.pool.query(
    `DELETE FROM ${outboxTable(store)} WHERE published_at < now() - make_interval(hours => $1)`,
    [retentionHours],
  );
  return res.rowCount ?? 0;
}
