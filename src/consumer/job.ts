import { createRequire } from 'node:module';
import type { Job } from 'bullmq';
import type { Pool, PoolClient } from 'pg';
import type { Logger } from '../logger.js';
import { inSpan, linksFrom, SpanKind } from '../tracing/tracing.js';
import { type FeedsyncEvent, readEvent } from './events.js';
import { withInbox } from './inbox.js';
import type { TransactionLimits } from './transaction.js';

// BullMQ is loaded when a consumer runs, as the publisher loads it: a bundle does not follow createRequire.
const require = createRequire(import.meta.url);

/** What a consumer's jobs are handled with. */
export interface JobContext {
  readonly pool: Pool;
  /** The consumer's name: the inbox key. */
  readonly name: string;
  readonly schema: string;
  /** The handlers by type, as createConsumer was given them (checked there). */
  readonly handlers: { readonly [type: string]: unknown };
  readonly limits: TransactionLimits;
  readonly logger: Logger;
}

/**
 * The processor of a consumer's Workers: each job in a span of its own trace, linked (not
 * parented) to the commit that stored its event when the job carries that commit's
 * context (a batch of a thousand events does not become one trace of a thousand jobs),
 * its event applied once through the inbox.
 */
export function jobProcessor(ctx: JobContext): (job: Job) => Promise<void> {
  return (job) =>
    inSpan(
      'handle job',
      {
        'messaging.system': 'bullmq',
        'messaging.destination.name': job.queueName,
        'feedsync.consumer': ctx.name,
        'feedsync.event.type': job.name,
        'feedsync.job.attempt': job.attemptsMade + 1,
      },
      (span) => handleJob(ctx, job, (applied) => span.setAttribute('feedsync.job.applied', applied)),
      { kind: SpanKind.CONSUMER, links: linksFrom(job.opts.telemetry?.metadata) },
    );
}

async function handleJob(ctx: JobContext, job: Job, onApplied: (applied: boolean) => void): Promise<void> {
  let event: FeedsyncEvent;
  try {
    event = readEvent(job.data, job.id ?? '?');
  } catch (err) {
    // No retry can mend the job's data: failed at once, kept by BullMQ for a look.
    const { UnrecoverableError } = require('bullmq') as typeof import('bullmq');
    throw new UnrecoverableError((err as Error).message);
  }
  const handler = ctx.handlers[event.type] as
    | ((e: FeedsyncEvent, db: PoolClient) => Promise<unknown>)
    | undefined;
  if (!handler) return;
  const applied = await withInbox(ctx.pool, ctx.name, event, (db) => handler(event, db), {
    schema: ctx.schema,
    ...ctx.limits,
  });
  onApplied(applied);
  ctx.logger.debug({ job: job.id, type: event.type, applied }, applied ? 'applied' : 'seen before');
}
