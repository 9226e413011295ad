import { CONFIG_DEFAULTS } from '../config/config-defaults.js';

/**
 * Every default of the consumer, in one place: what `createConsumer` and `withInbox`
 * use for an option that is not given. CONSUMER.md's options table lists the same.
 */
export const CONSUMER_DEFAULTS = Object.freeze({
  /**
   * Jobs run at once, per queue; each holds a client of the pool while it runs. Each job
   * waits mostly on round trips and its commit's fsync, and Postgres flushes the commits
   * of concurrent transactions together: 16 gave about twice the jobs/s of 4 on both
   * backends, 32 little more (docs/BENCHMARKS.md, the queues side by side).
   */
  concurrency: 16,
  /** The schema of the inbox table. */
  schema: 'public',
  /**
   * Hours an inbox row is kept at the least: 7 days, how long BullMQ keeps a completed
   * job (feedsync's default), whose id guards the queue meanwhile. OUTBOX_RETENTION_HOURS
   * raises it when it is longer (how far back `feedsync requeue --since` reaches).
   */
  minRetentionHours: CONFIG_DEFAULTS.OUTBOX_RETENTION_HOURS,
  /**
   * Milliseconds a job's transaction (the inbox row and the handler) may last: past it, the
   * transaction is rolled back (its connection ended) and the job fails with its retries.
   * A hung handler (an HTTP call that never returns, a paused process) holds its row lock
   * no longer than this.
   */
  handlerTimeoutMs: 30_000,
  /**
   * Milliseconds one of the consumer's statements (the inbox INSERT, a prune, migrate())
   * waits for a lock before it gives up (Postgres's lock_timeout), so that a replica
   * never queues behind another's long transaction and makes the others queue behind it.
   */
  lockTimeoutMs: 5_000,
  /**
   * Milliseconds close() waits for the jobs in hand to commit; past it, their
   * transactions are rolled back and the jobs come back to another replica after their
   * lock. Under Kubernetes' default grace of 30 s.
   */
  closeTimeoutMs: 25_000,
  /**
   * Milliseconds a job's lock lasts without renewal (BullMQ's lockDuration, its default):
   * a killed replica's job is handed on once it lapses, at the next stalled check.
   */
  lockDuration: 30_000,
  /**
   * Milliseconds between stalled checks of a queue (BullMQ's stalledInterval, its
   * default): one statement a queue each time on Postgres queues (4 a minute for the two
   * queues, idle or not). A killed replica's job runs again once one check has seen it
   * active and the next finds its lock lapsed: within lockDuration + 2 × this (90 s),
   * mostly lockDuration + this.
   */
  stalledInterval: 30_000,
  /**
   * On Postgres queues, seconds an idle Worker waits on its LISTEN before it looks at
   * its queue again (BullMQ's drainDelay; default 5). A job added wakes it at once by
   * NOTIFY, a delayed job (a retry's back-off) by its due time, a LISTEN connection
   * lost by keepalive: the look is only a backstop, and at BullMQ's 5 s it was three
   * statements a queue every 5 s, 72 a minute of an idle consumer. At 300 s it is 1.2 a
   * minute. With Redis, BullMQ's default stays (a blocking read in Redis costs Postgres
   * nothing).
   */
  pgDrainDelaySeconds: 300,
  /** Milliseconds to reach Redis at run(). */
  connectTimeoutMs: 10_000,
  /** Rows one prune statement deletes at most: a short statement that never holds many locks. */
  pruneBatch: 1_000,
  /** Milliseconds between pruning rounds; a round deletes batch after batch until none is left. */
  pruneEveryMs: 600_000,
  /** Milliseconds from run() to the first pruning round, so a consumer restarted often still prunes. */
  pruneFirstAfterMs: 60_000,
});
