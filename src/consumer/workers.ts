import { createRequire } from 'node:module';
import type { Job, Worker } from 'bullmq';
import type { WorkersConnection } from '../compose/queue-store.js';
import type { Logger } from '../logger.js';
import { CONSUMER_DEFAULTS } from './defaults.js';
import type { Stalls } from './options.js';
import { redacted } from './redacted.js';
import { WorkerErrors } from './worker-errors.js';

// BullMQ is loaded when a consumer runs, as the publisher loads it: a bundle does not follow createRequire.
const require = createRequire(import.meta.url);

/** Milliseconds close() gives the jobs it cut off to be recorded as failed. */
const CUT_OFF_GRACE_MS = 2_000;

/** What the consumer's Workers are made with: one Worker per queue, not yet running. */
export interface WorkersOptions {
  readonly queueNames: readonly string[];
  readonly processor: (job: Job) => Promise<void>;
  readonly queues: WorkersConnection;
  readonly prefix: string;
  readonly concurrency: number;
  readonly stalls: Stalls;
  readonly logger: Logger;
}

/** Each Worker's errors, bounded in log lines and backed off. */
const errors = new WeakMap<Worker, WorkerErrors>();

/** A Worker per queue, whose failures and errors are logged without an address. */
export function makeWorkers(opts: WorkersOptions): Worker[] {
  const { Worker: BullWorker } = require('bullmq') as typeof import('bullmq');
  const { connection, backend } = opts.queues;
  const { logger } = opts;
  return opts.queueNames.map((queue) => {
    const options = {
      lockDuration: CONSUMER_DEFAULTS.lockDuration,
      stalledInterval: CONSUMER_DEFAULTS.stalledInterval,
      ...opts.stalls,
      prefix: opts.prefix,
      concurrency: opts.concurrency,
      autorun: false,
    };
    const worker = backend
      ? (new BullWorker(
          queue,
          opts.processor,
          {
            ...options,
            // Idle, the Worker waits on its LISTEN; NOTIFY wakes it (defaults.ts says why).
            drainDelay: CONSUMER_DEFAULTS.pgDrainDelaySeconds,
            connection: connection as import('bullmq').PostgresConnectionOptions,
          },
          backend,
        ) as unknown as Worker)
      : new BullWorker(queue, opts.processor, {
          ...options,
          connection: connection as import('bullmq').ConnectionOptions,
        });
    worker.on('failed', (job, err) => {
      const again =
        job !== undefined && job.attemptsMade < (job.opts.attempts ?? 1) && err.name !== 'UnrecoverableError';
      logger.warn(
        { job: job?.id, type: job?.name, attempt: job?.attemptsMade, err: redacted(err) },
        again ? 'job failed, rolled back; BullMQ retries it' : 'job failed for good, rolled back',
      );
    });
    errors.set(worker, new WorkerErrors(worker, queue, logger));
    return worker;
  });
}

/** Runs the Workers; a Worker that stops on an error is logged. */
export function runWorkers(workers: readonly Worker[], logger: Logger): void {
  for (const worker of workers) {
    void worker.run().catch((err: unknown) => logger.error({ err: redacted(err) }, 'worker stopped'));
  }
}

/**
 * Closes the Workers: their jobs in hand finish, or past `closeTimeoutMs` are cut off
 * (`cutOff` aborted: their transactions roll back) and given a moment to be recorded.
 */
export async function closeWorkers(
  workers: readonly Worker[],
  opts: { closeTimeoutMs: number; cutOff: AbortController; logger: Logger },
): Promise<void> {
  for (const worker of workers) errors.get(worker)?.stop();
  const closing = Promise.all(workers.map((w) => w.close()));
  if (await settlesWithin(closing, opts.closeTimeoutMs)) return;
  opts.logger.warn(
    { closeTimeoutMs: opts.closeTimeoutMs },
    'jobs still in hand at close: rolled back, they run again after their lock',
  );
  opts.cutOff.abort();
  // The jobs cut off fail at once; recording that in Redis no longer holds close() up for long.
  await settlesWithin(closing, CUT_OFF_GRACE_MS);
}

/** True when `promise` settles within `ms`, false when the time passes first. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  const settled = promise.then(
    () => true as const,
    () => true as const,
  );
  try {
    return await Promise.race([settled, late]);
  } finally {
    clearTimeout(timer);
  }
}
