import type { ServiceEvent } from '../api/types.js';
import { EMAIL_EVENT_TYPES } from '../event-types.js';
import { nestedDeeperThan } from './json-text.js';
import { normaliseTimestamp } from './timestamp.js';

/** The longest event id kept; the key of three indexes. */
export const MAX_ID_LENGTH = 500;
/** The longest event type kept: the service's are about 20 characters; it goes into every log line of the event. */
export const MAX_TYPE_LENGTH = 100;
/** The longest data.email_id of an email event: the key of email_status (a btree row holds about 2.7 KB). */
export const MAX_EMAIL_ID_LENGTH = 500;
/**
 * How deep `data` may nest (a flat object is 1). Far deeper than any event the
 * service sends, far shallower than where a serializer on the way gives up
 * (V8's JSON.stringify, on the way to BullMQ, at a few thousand levels).
 */
export const MAX_DATA_DEPTH = 256;

/** The email types whose data.email_id keys the email_status projection. */
const PROJECTED: ReadonlySet<string> = new Set(EMAIL_EVENT_TYPES);

export type Envelope = { ok: true; event: ServiceEvent } | { ok: false; reason: string };

/**
 * Checks one feed item or webhook body against the envelope of DESIGN section 1
 * and the limits of the store, cheaply and without recursion. A valid envelope
 * comes back with created_at in the UTC form Postgres always takes (the only
 * field it changes); anything else comes back with the reason it goes to
 * quarantine.
 */
export function readEnvelope(item: unknown): Envelope {
  if (typeof item !== 'object' || item === null || Array.isArray(item)) return fail('not an object');
  const e = item as Record<string, unknown>;
  if (typeof e.id !== 'string' || e.id.length === 0) return fail('no id');
  if (e.id.length > MAX_ID_LENGTH) return fail(`id longer than ${MAX_ID_LENGTH} characters`);
  if (typeof e.type !== 'string' || e.type.length === 0) return fail('no type');
  if (e.type.length > MAX_TYPE_LENGTH) return fail(`type longer than ${MAX_TYPE_LENGTH} characters`);
  const createdAt = typeof e.created_at === 'string' ? normaliseTimestamp(e.created_at) : null;
  if (createdAt === null) return fail('bad created_at');
  if (typeof e.data !== 'object' || e.data === null || Array.isArray(e.data)) {
    return fail('data is not an object');
  }
  const data = e.data as Record<string, unknown>;
  if (
    PROJECTED.has(e.type) &&
    typeof data.email_id === 'string' &&
    data.email_id.length > MAX_EMAIL_ID_LENGTH
  ) {
    return fail(`data.email_id longer than ${MAX_EMAIL_ID_LENGTH} characters`);
  }
  if (nestedDeeperThan(data, MAX_DATA_DEPTH)) return fail(`data nested deeper than ${MAX_DATA_DEPTH} levels`);
  const event = item as ServiceEvent;
  return { ok: true, event: createdAt === event.created_at ? event : { ...event, created_at: createdAt } };
}

function fail(reason: string): Envelope {
  return { ok: false, reason };
}
