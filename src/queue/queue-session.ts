import type { Queue } from 'bullmq';
import { withDeadline } from '../deadline.js';
import type { JobToAdd, Publisher } from './publisher.js';
import type { JobOptions } from './routes.js';

/** What both publishers, Redis and Postgres, take besides where the queues live. */
export interface QueueSessionOptions {
  /** Retention, attempts and backoff of every added job (`jobOptionsFor(config.queues)`). */
  jobOptions: JobOptions;
  /**
   * Max wait for connecting, or for one call. Default 5 s. A call waits at most this
   * for its connection and twice this for its commands, then rejects (a RedisError, or
   * QUEUE_TIMEOUT on Postgres): no call hangs, whatever state the queues' store is in.
   */
  timeoutMs?: number;
  /**
   * Aborted on the first SIGTERM. From then on, once a call has failed, no connection
   * is made again: calls reject at once (REDIS_STOPPING, QUEUE_STOPPING), so a drain
   * against a store that stopped answering ends within its backoffs, not a connection
   * bound per attempt. A connection that works keeps serving, so a healthy drain still
   * finishes.
   */
  stopping?: AbortSignal;
}

/** One connection's queues by name; a backend keeps beside them whatever else it needs. */
export interface QueueConnection {
  readonly queues: Map<string, Queue>;
}

/** Where Redis and Postgres differ in a session: `H` is what calls on a connection use, `C` the connection. */
export interface SessionBackend<H, C extends QueueConnection = QueueConnection> {
  /** Starts a connection, without waiting for it. */
  open(): C;
  /** Waits, bounded on its own, until `conn` takes calls. */
  ready(conn: C): Promise<H>;
  /** A new queue on the connection. */
  newQueue(name: string, handle: H): Queue;
  /** Lets go of what the connection holds besides its queues (none on Postgres: each queue has its pool). */
  release?(conn: C): Promise<void>;
  /** What a call rejects with while stopping, once the last call failed. */
  stopped(): Error;
  /** What a failed call rejects with. */
  toError(err: unknown): Error;
  /** What a call is named in the error of one past its bound. */
  callName: string;
  /** The error of a call past its bound (withDeadline's REDIS_TIMEOUT by default). */
  expired?: () => Error;
}

/** The states `counts` reports. */
const JOB_STATES = ['waiting', 'active', 'completed', 'failed', 'delayed', 'prioritized'] as const;
/** Failed jobs read and retried per round. */
const RETRY_PAGE = 500;

/**
 * BullMQ queues on one fail-fast connection, made on first use. Any failure drops
 * the connection and its queues, so the next call (the relay's retry) connects
 * afresh rather than waiting on a half-open one.
 */
export class QueueSession<H, C extends QueueConnection = QueueConnection> {
  #conn: C | null = null;
  /** The last call failed: while stopping, no new connection is tried. */
  #failing = false;

  constructor(
    private readonly backend: SessionBackend<H, C>,
    private readonly timeoutMs: number,
    private readonly stopping: AbortSignal | undefined,
  ) {}

  /** Runs `fn` on the connection, made first if there is none, within twice the timeout. */
  async withConnection<T>(fn: (handle: H, conn: C) => Promise<T>): Promise<T> {
    if (!this.#conn && this.#failing && this.stopping?.aborted) throw this.backend.stopped();
    this.#conn ??= this.backend.open();
    const current = this.#conn;
    try {
      const handle = await this.backend.ready(current);
      const { timeoutMs, backend } = this;
      const result = await withDeadline(
        fn(handle, current),
        timeoutMs * 2,
        backend.callName,
        backend.expired,
      );
      this.#failing = false;
      return result;
    } catch (err) {
      this.#failing = true;
      // Only the connection this call used: a newer one may already serve other calls.
      await this.reset(current);
      throw this.backend.toError(err);
    }
  }

  /** Runs `fn` on the queue named `name`, made on first use. */
  withQueue<T>(name: string, fn: (queue: Queue, handle: H, conn: C) => Promise<T>): Promise<T> {
    return this.withConnection((handle, conn) => {
      let queue = conn.queues.get(name);
      if (!queue) {
        queue = this.backend.newQueue(name, handle);
        queue.on('error', () => {});
        conn.queues.set(name, queue);
      }
      return fn(queue, handle, conn);
    });
  }

  /** Drops `which` (the current connection by default) so that the next call connects afresh. */
  async reset(which: C | null = this.#conn): Promise<void> {
    if (!which) return;
    if (this.#conn === which) this.#conn = null;
    // Bounded too: a queue's close must not hold up a shutdown while the store is failing over.
    await withDeadline(
      Promise.allSettled([...which.queues.values()].map((q) => q.close())),
      this.timeoutMs,
      'closing the queues',
      this.backend.expired,
    ).catch(() => {});
    await this.backend.release?.(which);
  }
}

/** A Publisher of a backend's own calls, and of those both backends make alike. */
export function publisherOn<H, C extends QueueConnection>(
  session: QueueSession<H, C>,
  own: Pick<Publisher, 'addBulk' | 'present' | 'ping' | 'pings'>,
): Publisher {
  return {
    ...own,
    retryFailed: (name) => retryAllFailed((fn) => session.withQueue(name, fn)),
    counts: (name) => session.withQueue(name, (queue) => queue.getJobCounts(...JOB_STATES)),
    close: () => session.reset(),
  };
}

/**
 * Moves every job that failed for good back to waiting: bounded by the count at the
 * start (a job that fails again meanwhile waits for the next call), a page per call of
 * `onQueue`, so that each stays inside the publisher's timeout.
 */
async function retryAllFailed(
  onQueue: <T>(fn: (queue: Queue) => Promise<T>) => Promise<T>,
): Promise<string[]> {
  const retried: string[] = [];
  let left = await onQueue((queue) => queue.getFailedCount());
  while (left > 0) {
    const page = await onQueue(async (queue) => {
      const jobs = await queue.getFailed(0, Math.min(left, RETRY_PAGE) - 1);
      for (const job of jobs) {
        await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
      }
      return jobs.map((job) => job.id!);
    });
    if (page.length === 0) break;
    retried.push(...page);
    left -= page.length;
  }
  return retried;
}

/** `items` in runs of at most `size`, in order. */
export function* batchesOf<T>(items: readonly T[], size: number): Generator<T[]> {
  for (let i = 0; i < items.length; i += size) yield items.slice(i, i + size);
}

/** Jobs as BullMQ's addBulk takes them, on either backend. */
export function bulkJobsOf(jobs: readonly JobToAdd[]): { name: string; data: unknown; opts: JobOpts }[] {
  return jobs.map((j) => ({ name: j.name, data: j.data, opts: jobOpts(j) }));
}

type JobOpts = { jobId: string; telemetry?: { metadata: string } };

/**
 * A job's own options: its id, and the commit's trace context in BullMQ's
 * `telemetry.metadata` (stored with the job's options, returned to a Worker as
 * `job.opts.telemetry.metadata`), so the job data stays {source, id, type, created_at, data}.
 */
function jobOpts(job: JobToAdd): JobOpts {
  return job.trace === undefined
    ? { jobId: job.jobId }
    : { jobId: job.jobId, telemetry: { metadata: job.trace } };
}
