import { FeedsyncError } from '../errors.js';
import {
  CONTACT_EVENT_TYPES,
  type ContactEventType,
  EMAIL_EVENT_TYPES,
  type EmailEventType,
} from '../event-types.js';

export type { ContactEventType, EmailEventType };
/** Every type feedsync hands to BullMQ. */
export type FeedsyncEventType = EmailEventType | ContactEventType;

/** `data` of an email event: the message's id and its recipients; other fields as the service sent them. */
export interface EmailData {
  readonly email_id: string;
  readonly to: readonly string[];
  readonly [field: string]: unknown;
}

/** One job's data: the event as the service sent it, with the feedsync source (account) it came from. */
export interface EventOf<T extends FeedsyncEventType, D> {
  /** The source (FEED_SOURCE, or an entry of FEED_SOURCES_FILE): which account. */
  readonly source: string;
  /** The service's event id: with the source, what the inbox records. */
  readonly id: string;
  readonly type: T;
  /** ISO 8601, UTC. */
  readonly created_at: string;
  readonly data: D;
}

/** A job feedsync added, told apart by `type`. */
export type FeedsyncEvent =
  | { [T in EmailEventType]: EventOf<T, EmailData> }[EmailEventType]
  | { [T in ContactEventType]: EventOf<T, Readonly<Record<string, unknown>>> }[ContactEventType];

const EMAIL_TYPES: ReadonlySet<string> = new Set(EMAIL_EVENT_TYPES);
const CONTACT_TYPES: ReadonlySet<string> = new Set(CONTACT_EVENT_TYPES);

/**
 * The event of a job's data, checked against its type, or a FeedsyncError with code
 * CONSUMER_BAD_EVENT (a job no retry can mend). `to` is read as feedsync's
 * email_status reads it: one address given as a string is a list of one, and what
 * is not a string is left out. The message names the job, never an address.
 */
export function readEvent(value: unknown, jobId: string): FeedsyncEvent {
  const bad = (why: string) =>
    new FeedsyncError(`job ${jobId}: ${why}; not a job feedsync added`, { code: 'CONSUMER_BAD_EVENT' });
  if (typeof value !== 'object' || value === null) throw bad('its data is not an object');
  const e = value as Record<string, unknown>;
  for (const key of ['source', 'id', 'type', 'created_at'] as const) {
    if (typeof e[key] !== 'string') throw bad(`${key} is not a string`);
  }
  const data = e.data;
  if (typeof data !== 'object' || data === null || Array.isArray(data)) throw bad('data is not an object');
  const type = e.type as string;
  if (CONTACT_TYPES.has(type)) return e as unknown as FeedsyncEvent;
  if (!EMAIL_TYPES.has(type))
    throw bad(`type ${JSON.stringify(type.slice(0, 60))} is not one feedsync routes`);
  const fields = data as Record<string, unknown>;
  if (typeof fields.email_id !== 'string') throw bad(`data.email_id of ${type} is not a string`);
  const raw = fields.to;
  const to = (Array.isArray(raw) ? raw : [raw]).filter((a): a is string => typeof a === 'string');
  return {
    ...(e as unknown as FeedsyncEvent),
    data: { ...fields, email_id: fields.email_id, to },
  } as FeedsyncEvent;
}

/** Text with every e-mail address in it replaced, for a log line. */
export function withoutAddresses(text: string): string {
  return text.replace(/[^\s@<>()[\]"',;:]+@[^\s@<>()[\]"',;:]+/g, '[address]');
}
