import type { JobToAdd } from './publisher.js';

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
