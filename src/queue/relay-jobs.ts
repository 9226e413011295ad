import type { Logger } from '../logger.js';
import type { OutboxEntry } from '../store/applier.js';
import type { OutboxRow } from '../store/outbox.js';
import { inSpan, type Link, linksFrom, SpanKind } from '../tracing/tracing.js';
import { jobData } from './job-data.js';
import type { JobToAdd } from './publisher.js';
import type { RelayOptions } from './relay.js';
import { jobIdFor } from './routes.js';

/** A job to add, with the moment its row was committed. */
export interface Pending {
  queue: string;
  job: JobToAdd;
  committedAt: number;
}

/** What adding jobs reads, each as RelayOptions describes it. */
export type AddJobsOptions = Required<Pick<RelayOptions, 'publisher' | 'now'>> &
  Pick<RelayOptions, 'onPublished' | 'onPublishDelay'>;

/** addBulk per queue, each queue's jobs in the order given. */
export async function addJobs(pending: readonly Pending[], opts: AddJobsOptions): Promise<void> {
  const byQueue = new Map<string, Pending[]>();
  for (const p of pending) {
    const list = byQueue.get(p.queue) ?? [];
    byQueue.set(p.queue, list);
    list.push(p);
  }
  for (const [queue, list] of byQueue) {
    await inSpan(
      'publish',
      {
        'messaging.system': 'bullmq',
        'messaging.destination.name': queue,
        'messaging.batch.message_count': list.length,
      },
      () =>
        opts.publisher.addBulk(
          queue,
          list.map((p) => p.job),
        ),
      { kind: SpanKind.PRODUCER, links: commitLinks(list) },
    );
    opts.onPublished?.(queue, list.length);
    if (opts.onPublishDelay) {
      const at = opts.now();
      for (const p of list) opts.onPublishDelay(Math.max(0, at - p.committedAt) / 1000);
    }
  }
}

/** A row on offer, as its job to add, committed at `at`. */
export function jobOfOffer(entry: OutboxEntry, at: number): Pending {
  return {
    queue: entry.queue,
    job: {
      name: entry.jobName,
      jobId: jobIdFor(entry.source, entry.event.id),
      data: jobData(entry.source, entry.event),
      trace: entry.trace,
    },
    committedAt: at,
  };
}

/** Rows read from the outbox, as jobs to add; a row whose event is gone gives none, and is logged. */
export function jobsOfRows(rows: readonly OutboxRow[], log: Logger): Pending[] {
  const pending: Pending[] = [];
  const missing: { source: string; eventId: string }[] = [];
  for (const row of rows) {
    if (row.data === null) missing.push({ source: row.source, eventId: row.eventId });
    else
      pending.push({
        queue: row.queue,
        job: { name: row.jobName, jobId: jobIdFor(row.source, row.eventId), data: row.data },
        committedAt: row.committedAt,
      });
  }
  // The retention keeps every event with an unpublished row; a row without one has no job to give.
  if (missing.length > 0)
    log.error(
      { rows: missing.length, first: missing[0] },
      'outbox rows whose event is gone were marked published without a job: the events were deleted outside feedsync',
    );
  return pending;
}

/** Links to the commits a batch's jobs came from (a few: a batch is a few commits' rows), none for rows read back. */
function commitLinks(list: readonly Pending[]): Link[] {
  const traces = new Set<string>();
  for (const p of list) if (p.job.trace !== undefined && traces.size < 32) traces.add(p.job.trace);
  return [...traces].flatMap(linksFrom);
}
