import type { RawItem } from './raw-items.js';
/** The envelope of every event, in the feed and in webhook deliveries. */
export interface ServiceEvent {
  type: string;
  id: string;
  /** ISO 8601, UTC. */
  created_at: string;
  data: Record<string, unknown>;
}

/** `data` of the five `email.*` events. */
export interface EmailEventData {
  email_id: string;
  to: string[];
  [key: string]: unknown;
}

export interface SendEmailRequest {
  from: string;
  to: string[];
  subject: string;
  html: string;
}

export interface SendEmailResponse {
  id: string;
}

export interface Webhook {
  id: string;
  url: string;
  events: string[];
  [key: string]: unknown;
}

/** What `POST /webhooks` answers: the only time the signing secret is shown. */
export interface CreatedWebhook extends Webhook {
  signing_secret: string;
}

export interface CreateWebhookRequest {
  url: string;
  events: string[];
}

export interface EventsQuery {
  /** The id to read after; omitted for the start of the feed. */
  after?: string | null | undefined;
  /** Types in the feed's short form (`delivered`, `contact.subscribed`), comma-joined by the client. */
  type?: readonly string[] | undefined;
  limit?: number | undefined;
}

/** One page of `GET /events` as it came: the list is checked by the feed module, not here. */
export interface RawEventsPage {
  /** The parsed JSON body, whatever shape it has. */
  body: unknown;
  /** Size of the body in bytes. */
  bytes: number;
  /**
   * Items of the body's lists that cannot be stored as parsed (a number JSON.parse
   * changed, bytes that are not UTF-8), with their raw text and why (api/raw-items.ts).
   */
  rawItems?: ReadonlyMap<object, RawItem>;
}
