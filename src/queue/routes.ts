import type { Config } from '../config/config-type.js';
import { JOB_RETENTION } from '../config/job-retention.js';
import { CONTACT_EVENT_TYPES, EMAIL_EVENT_TYPES } from '../event-types.js';
import type { EventRoute } from '../store/applier.js';

const EMAIL_TYPES: ReadonlySet<string> = new Set(EMAIL_EVENT_TYPES);
const CONTACT_TYPES: ReadonlySet<string> = new Set(CONTACT_EVENT_TYPES);

/**
 * The queue for each event type: the five email types and the two contact types.
 * Any other type (webhook.test, a future email.opened) is stored but gets no job.
 */
export function routeFor(
  queues: Pick<Config['queues'], 'emailEvents' | 'contactEvents'>,
): (type: string) => EventRoute | null {
  return (type) => {
    if (EMAIL_TYPES.has(type)) return { queue: queues.emailEvents, jobName: type };
    if (CONTACT_TYPES.has(type)) return { queue: queues.contactEvents, jobName: type };
    return null;
  };
}

/** BullMQ forbids `:` in custom ids; encodeURIComponent turns it into `%3A`. */
export function jobIdFor(source: string, eventId: string): string {
  return `${encodeURIComponent(source)}/${encodeURIComponent(eventId)}`;
}

/** The options every added job carries: its retention and BullMQ's retries. */
export interface JobOptions {
  readonly removeOnComplete: { readonly age: number };
  readonly removeOnFail: { readonly age: number };
  /** Runs before the job fails for good. */
  readonly attempts: number;
  /** Retry n waits `delay × 2^(n-1)` ms. */
  readonly backoff: { readonly type: 'exponential'; readonly delay: number };
}

/** JOB_ATTEMPTS and JOB_BACKOFF_MS as BullMQ job options. */
export function jobOptionsFor(queues: Pick<Config['queues'], 'jobAttempts' | 'jobBackoffMs'>): JobOptions {
  return {
    ...JOB_RETENTION,
    attempts: queues.jobAttempts,
    backoff: { type: 'exponential', delay: queues.jobBackoffMs },
  };
}
