import { JOB_RETENTION } from '../config/job-retention.js';
import { ConfigError } from '../errors.js';
import { quoteSchema, type Store } from './db.js';

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
/** The service retries a webhook delivery for a day: a retry must still find its event stored. */
const WEBHOOK_RETRY_WINDOW_MS = DAY_MS;

/**
 * How long an event is kept after it arrived under EVENTS_RETENTION_DAYS: never less
 * than the service's retry window, the time BullMQ keeps a completed job (its job id
 * de-duplicates only that long) and the time requeue keeps published rows
 * (OUTBOX_RETENTION_HOURS). Shorter, an event served again would be stored and
 * enqueued again as new, and requeue would find rows without their event.
 */
export function eventsKeptMs(days: number, outboxHours: number): number {
  return Math.max(
    days * DAY_MS,
    WEBHOOK_RETRY_WINDOW_MS,
    JOB_RETENTION.removeOnComplete.age * 1000,
    outboxHours * HOUR_MS,
  );
}

/** Events that arrived before this instant may be pruned under EVENTS_RETENTION_DAYS (never sooner than eventsKeptMs). */
function retentionCutoff(days: number, now = Date.now()): Date {
  return new Date(now - days * DAY_MS);
}

/**
 * Refuses (exit 2) a start point older than the events' retention: re-reading from
 * there would bring back events already pruned, which then count as new (stored and
 * enqueued again). `what` names the option in the message. No-op without a retention.
 */
export function assertWithinRetention(what: string, at: Date, days: number | null, now = Date.now()): void {
  if (days === null) return;
  const cutoff = retentionCutoff(days, now);
  if (at >= cutoff) return;
  throw new ConfigError(
    `${what}: ${at.toISOString()} is older than EVENTS_RETENTION_DAYS (${days}): events that arrived before ` +
      `${cutoff.toISOString()} may be pruned, so starting there would store and enqueue them again as new; ` +
      'pick a later start, or raise EVENTS_RETENTION_DAYS',
    'BEFORE_RETENTION',
  );
}

/**
 * Refuses (exit 2) an event id as a start point unless it is a stored event that
 * arrived inside the retention (events are pruned by arrival: one dated long ago
 * that arrived yesterday is a good start). An id that is not stored may have been
 * pruned: its age cannot be told, so it is refused too. No-op without a retention.
 */
export async function assertEventWithinRetention(
  store: Store,
  source: string,
  eventId: string,
  what: string,
  days: number | null,
  now = Date.now(),
): Promise<void> {
  if (days === null) return;
  const { rows } = await store.pool.query<{ received_at: Date }>(
    `SELECT received_at FROM ${quoteSchema(store.schema)}.events WHERE source = $1 AND id = $2`,
    [source, eventId],
  );
  const event = rows[0];
  if (!event) {
    throw new ConfigError(
      `${what}: event ${JSON.stringify(eventId.slice(0, 200))} is not stored for source "${source}": with ` +
        `EVENTS_RETENTION_DAYS (${days}) set, a start must be a stored event newer than ` +
        `${retentionCutoff(days, now).toISOString()} (an older one may have been pruned)`,
      'BEFORE_RETENTION',
    );
  }
  assertWithinRetention(`${what} ${eventId.slice(0, 200)} (arrived)`, event.received_at, days, now);
}
