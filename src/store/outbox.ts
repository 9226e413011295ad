/**
 * The outbox table's statements, in one place, by who asks (one file grew past 250 lines):
 * - outbox/relay.ts: the relay's reads and marks, in transactions of their own;
 * - outbox/upkeep.ts: the backlog (metrics, status, doctor), what retention keeps, the pruning;
 * - outbox/requeue.ts: the published rows requeue re-drives, and where it starts.
 * Two clauses stay with the statements they belong to: the insert of new rows is a part of
 * the apply statement (store/apply-statement.ts, one round trip per batch), and the test for
 * an event whose row is unpublished is a part of retention's DELETE on events (store/retention.ts).
 */
export { type Outbox, type OutboxRow, pgOutbox } from './outbox/relay.js';
export {
  firstSeqSince,
  goneEventIds,
  type KeptRows,
  keptRowsOf,
  outboxSeqOf,
  type PublishedRange,
  type PublishedRow,
  publishedCountsByQueue,
  publishedRows,
  type QueueCount,
} from './outbox/requeue.js';
export {
  firstKeptPublishedCreatedAt,
  type OutboxSummary,
  outboxBacklog,
  outboxBacklogBySource,
  outboxSummary,
  pruneOutbox,
} from './outbox/upkeep.js';
