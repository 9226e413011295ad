/**
 * What the relay, the receiver and the commands ask of the queues, whichever holds them:
 * BullMQ on Redis (redis-publisher.ts) or on its Postgres backend (pg-publisher.ts).
 */

export interface JobToAdd {
  name: string;
  jobId: string;
  data: unknown;
  /** Trace metadata of the commit that stored the event (tracing.ts carrierOf): goes with the job, beside its data. */
  trace?: string | undefined;
}

/** The subset of BullMQ the relay needs. */
export interface Publisher {
  /**
   * Adds jobs to a named queue, in order. A failure may leave the first of them added:
   * the caller adds them all again, which their jobIds make harmless.
   */
  addBulk(queue: string, jobs: readonly JobToAdd[]): Promise<void>;
  /** Which of these job ids a queue still holds, in whatever state. */
  present(queue: string, jobIds: readonly string[]): Promise<Set<string>>;
  /**
   * Moves every job that failed for good back to waiting, with its own id and a fresh
   * count of attempts. Returns the ids it moved.
   */
  retryFailed(queue: string): Promise<string[]>;
  /** The queues' store answers (Redis a PING, Postgres a `select 1`). */
  ping(): Promise<boolean>;
  /** The name /readyz reports `ping()` under: Redis, or the queues' Postgres. */
  readonly pings: 'redis' | 'queues';
  /** Waiting, active, completed, failed and delayed counts of a queue. */
  counts(queue: string): Promise<Record<string, number>>;
  close(): Promise<void>;
}
