import { createHash } from 'node:crypto';
import type { SendEmailRequest, ServiceEvent } from '../api/types.js';
import { badRequest, SimError } from './errors.js';
import { type JsonObject, stringField, stringListField } from './json-body.js';

export type Outcome = 'delivered' | 'bounced' | 'complained' | 'failed';

/** Emits one event into the feed (and to matching webhooks). */
export type Emit = (type: string, data: Record<string, unknown>) => ServiceEvent;

const MAX_RECIPIENTS = 50;
const MAX_IDEMPOTENCY_KEY = 256;
/** Sent emails kept per account for the dashboard. */
export const EMAILS_KEPT = 50;

/** A sent email as the dashboard shows it: what was sent and the events it made. */
export interface SentEmail {
  id: string;
  from: string;
  to: string[];
  subject: string;
  created_at: string;
  events: { id: string; type: string; to: string[] }[];
}

/**
 * The outcome of a send to `address`, decided by its local part (before any
 * `+tag`): `bounced@`, `complained@`, `failed@`; anything else is delivered.
 */
export function outcomeOf(address: string): Outcome {
  const local = address.slice(0, address.lastIndexOf('@')).split('+')[0]!.toLowerCase();
  return local === 'bounced' || local === 'complained' || local === 'failed' ? local : 'delivered';
}

/** Checks a `POST /emails` body; throws 400 `missing_field` / `invalid_field`. */
export function parseSendRequest(body: JsonObject): SendEmailRequest {
  const from = stringField(body, 'from');
  const to = stringListField(body, 'to', { allowString: true });
  if (to.length > MAX_RECIPIENTS)
    throw badRequest('invalid_field', `"to" holds more than ${MAX_RECIPIENTS} addresses`);
  for (const address of to) {
    if (!/^[^@\s]+@[^@\s]+$/.test(address))
      throw badRequest('invalid_field', `"to" holds an invalid address`);
  }
  const subject = stringField(body, 'subject', { allowEmpty: true });
  const html = stringField(body, 'html', { allowEmpty: true });
  return { from, to, subject, html };
}

/**
 * Sends: emits `email.sent` and then, per group of recipients with the same
 * outcome, the outcome event (`complained` comes after a `delivered`). An
 * Idempotency-Key seen before with the same request answers the same id and
 * sends nothing; with another request it is a 409.
 */
export class Emails {
  private sent = 0;
  private readonly byKey = new Map<string, { fingerprint: string; id: string }>();
  private readonly kept: SentEmail[] = [];

  constructor(
    private readonly emit: Emit,
    private readonly nextId: () => string,
  ) {}

  get count(): number {
    return this.sent;
  }

  /** The last EMAILS_KEPT emails sent, newest first. */
  recent(): SentEmail[] {
    return this.kept.map((email) => ({ ...email, events: [...email.events] })).reverse();
  }

  send(request: SendEmailRequest, idempotencyKey: string | undefined): { id: string; replayed: boolean } {
    const fingerprint = createHash('sha256').update(JSON.stringify(request)).digest('hex');
    if (idempotencyKey !== undefined) {
      if (idempotencyKey === '' || idempotencyKey.length > MAX_IDEMPOTENCY_KEY) {
        throw badRequest('invalid_header', `Idempotency-Key must be 1 to ${MAX_IDEMPOTENCY_KEY} characters`);
      }
      const seen = this.byKey.get(idempotencyKey);
      if (seen && seen.fingerprint !== fingerprint) {
        throw new SimError(
          409,
          'idempotency_conflict',
          'this Idempotency-Key was used with a different request',
        );
      }
      if (seen) return { id: seen.id, replayed: true };
    }

    this.sent += 1;
    const id = this.nextId();
    if (idempotencyKey !== undefined) this.byKey.set(idempotencyKey, { fingerprint, id });

    const base = { email_id: id, from: request.from, subject: request.subject };
    const events: ServiceEvent[] = [this.emit('email.sent', { ...base, to: request.to })];
    for (const outcome of ['delivered', 'bounced', 'failed', 'complained'] as const) {
      const to = request.to.filter((address) => outcomeOf(address) === outcome);
      if (to.length === 0) continue;
      if (outcome === 'complained') events.push(this.emit('email.delivered', { ...base, to }));
      events.push(this.emit(`email.${outcome}`, { ...base, to }));
    }
    this.kept.push({
      id,
      from: request.from,
      to: request.to,
      subject: request.subject,
      created_at: events[0]!.created_at,
      events: events.map((e) => ({ id: e.id, type: e.type, to: e.data.to as string[] })),
    });
    if (this.kept.length > EMAILS_KEPT) this.kept.shift();
    return { id, replayed: false };
  }
}
