import { createRequire } from 'node:module';
import type { Queue } from 'bullmq';
import type { RedisSettings } from '../config/redis-settings.js';
import { RedisError } from '../errors.js';
import { connectRedis, type RedisConnection } from '../redis/connect.js';
import { withDeadline } from '../redis/deadline.js';
import { toRedisError } from '../redis/errors.js';
import { planWait, type WaitPlan, waitForReplicas } from '../redis/replicas.js';
import type { JobOptions } from './routes.js';

// BullMQ and ioredis are loaded on first use: a run with nothing to publish (a CronJob
// run that finds the feed caught up) starts without them, a quarter of its start-up.
const require = createRequire(import.meta.url);

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
  /** Waiting, active, completed, failed and delayed counts of a queue. */
  counts(queue: string): Promise<Record<string, number>>;
  close(): Promise<void>;
}

export interface PublisherOptions {
  redis: RedisSettings;
  prefix: string;
  /** Retention, attempts and backoff of every added job (`jobOptionsFor(config.queues)`). */
  jobOptions: JobOptions;
  /**
   * Max wait for connecting, or for one Redis command. Default 5 s. A call waits at
   * most this for its connection and twice this for its commands, then rejects with
   * a RedisError: no call hangs, whatever state Redis is in.
   */
  timeoutMs?: number;
  /**
   * Aborted on the first SIGTERM. From then on, once a call has failed, no connection
   * is made again: calls reject at once (REDIS_STOPPING), so a drain against a Redis
   * that stopped answering ends within its backoffs, not a connection bound per
   * attempt. A connection that works keeps serving, so a healthy drain still finishes.
   */
  stopping?: AbortSignal;
}

/** Jobs per Redis pipeline (one BullMQ addBulk call). */
const PIPELINE_JOBS = 250;
/** Failed jobs read and retried per round. */
const RETRY_PAGE = 500;
/** How long a connection keeps its resolved REDIS_WAIT_REPLICAS before it asks the master again. */
const PLAN_TTL_MS = 60_000;

/**
 * BullMQ queues on one fail-fast connection, made on first use. Any failure drops
 * the connection and its queues, so the next call (the relay's retry) connects
 * afresh rather than waiting on a half-open one.
 */
export function createPublisher(opts: PublisherOptions): Publisher {
  const timeoutMs = opts.timeoutMs ?? 5_000;
  type Conn = {
    redis: Promise<RedisConnection>;
    queues: Map<string, Queue>;
    Queue: typeof Queue;
    /** REDIS_WAIT_REPLICAS as resolved for this connection, and when (made on its first addBulk). */
    plan: { value: Promise<WaitPlan>; at: number } | null;
  };
  let conn: Conn | null = null;
  /** The last call failed: while stopping, no new connection is tried. */
  let failing = false;

  /** Drops `which` (the current connection by default) so that the next call connects afresh. */
  const reset = async (which: Conn | null = conn): Promise<void> => {
    if (!which) return;
    if (conn === which) conn = null;
    // Bounded too: a queue's close must not hold up a shutdown while Redis is failing over.
    await withDeadline(
      Promise.allSettled([...which.queues.values()].map((q) => q.close())),
      timeoutMs,
      'closing the queues',
    ).catch(() => {});
    (await which.redis.catch(() => null))?.disconnect();
  };
  const withConnection = async <T>(fn: (c: Conn, redis: RedisConnection) => Promise<T>): Promise<T> => {
    if (!conn && failing && opts.stopping?.aborted) {
      throw new RedisError('Redis: stopping, and the last Redis call failed: not connecting again', {
        code: 'REDIS_STOPPING',
        command: null,
      });
    }
    if (!conn) {
      const { Queue } = require('bullmq') as typeof import('bullmq');
      // Every caller waits on the same connect: a command on a connection still
      // connecting would fail at once (no offline queue) and tear it down for all.
      const redis = connectRedis(opts.redis, { timeoutMs, prefix: opts.prefix });
      redis.catch(() => {});
      conn = { redis, queues: new Map(), Queue, plan: null };
    }
    const current = conn;
    try {
      // connectRedis is bounded by timeoutMs itself (a cluster in cluster_state:fail included).
      const redis = await current.redis;
      const result = await withDeadline(fn(current, redis), timeoutMs * 2, 'a Redis call');
      failing = false;
      return result;
    } catch (err) {
      failing = true;
      // Only the connection this call used: a newer one may already serve other calls.
      await reset(current);
      // ioredis's errors hold the command's arguments (job data): only their message goes on.
      throw toRedisError(err);
    }
  };
  const queueOf = ({ queues, Queue }: Conn, redis: RedisConnection, name: string): Queue => {
    let q = queues.get(name);
    if (!q) {
      q = new Queue(name, {
        connection: redis.client,
        prefix: opts.prefix,
        defaultJobOptions: structuredClone(opts.jobOptions),
      });
      q.on('error', () => {});
      queues.set(name, q);
    }
    return q;
  };

  return {
    addBulk: (name, jobs) =>
      withConnection(async (c, redis) => {
        const queue = queueOf(c, redis, name);
        // Pipelines of a few hundred jobs, one after the other: a pipeline of a thousand
        // keeps every command and its buffers alive until Redis answers them all (peak
        // RSS 5-10 MB higher, end to end 7-30% slower, side by side in four rounds).
        for (let i = 0; i < jobs.length; i += PIPELINE_JOBS) {
          await queue.addBulk(bulkJobsOf(jobs.slice(i, i + PIPELINE_JOBS)));
        }
        // Made again now and then: a long-lived connection (sync --watch) sees a replica added since.
        if (!c.plan || Date.now() - c.plan.at > PLAN_TTL_MS) {
          c.plan = { value: planWait(redis, opts.redis.waitReplicas, opts.prefix), at: Date.now() };
        }
        // Half the budget: WAIT must answer before the command timeout ends it.
        await waitForReplicas(redis, await c.plan.value, Math.floor(timeoutMs / 2));
      }),
    present: (name, jobIds) =>
      withConnection(async (c, redis) => {
        const queue = queueOf(c, redis, name);
        const found = new Set<string>();
        for (let i = 0; i < jobIds.length; i += PIPELINE_JOBS) {
          const ids = jobIds.slice(i, i + PIPELINE_JOBS);
          const pipeline = redis.client.pipeline();
          for (const id of ids) pipeline.exists(queue.toKey(id));
          const replies = (await pipeline.exec()) ?? [];
          replies.forEach(([err, exists], k) => {
            if (err) throw err;
            if (exists === 1) found.add(ids[k]!);
          });
        }
        return found;
      }),
    retryFailed: (name) => retryAllFailed((fn) => withConnection((c, redis) => fn(queueOf(c, redis, name)))),
    ping: () => withConnection(async (_, redis) => (await redis.client.ping()) === 'PONG').catch(() => false),
    counts: (name) => withConnection((c, redis) => queueOf(c, redis, name).getJobCounts(...JOB_STATES)),
    close: () => reset(),
  };
}

/** The states `counts` reports. */
export const JOB_STATES = ['waiting', 'active', 'completed', 'failed', 'delayed', 'prioritized'] as const;

/**
 * Moves every job that failed for good back to waiting, on either backend: bounded by the
 * count at the start (a job that fails again meanwhile waits for the next call), a page
 * per call of `onQueue`, so that each stays inside the publisher's timeout.
 */
export async function retryAllFailed(
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
