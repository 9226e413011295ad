/**
 * The event types of the service's specification that feedsync routes and projects, in
 * one place: the queues (queue/routes.ts), the email_status projection (store/), the
 * envelope check (feed/), the type filter (config/), the consumer and the simulator
 * read them from here.
 */

/**
 * The five email types and where each puts a message in its life: email_status keeps the
 * furthest (DESIGN section 3). A bounce and a failure are both an end of delivery and
 * share a rank; a complaint comes after a delivery.
 */
export const EMAIL_STATUS_RANK = {
  'email.sent': 1,
  'email.delivered': 2,
  'email.bounced': 3,
  'email.failed': 3,
  'email.complained': 4,
} as const;

/** An email type: queue QUEUE_EMAIL_EVENTS. */
export type EmailEventType = keyof typeof EMAIL_STATUS_RANK;
export const EMAIL_EVENT_TYPES = Object.keys(EMAIL_STATUS_RANK) as readonly EmailEventType[];

/** The two contact types: queue QUEUE_CONTACT_EVENTS. */
export const CONTACT_EVENT_TYPES = ['contact.subscribed', 'contact.unsubscribed'] as const;
export type ContactEventType = (typeof CONTACT_EVENT_TYPES)[number];

/** Every type of the specification this release knows, sorted: the routed ones and webhook.test. */
export const KNOWN_EVENT_TYPES: readonly string[] = [
  ...EMAIL_EVENT_TYPES,
  ...CONTACT_EVENT_TYPES,
  'webhook.test',
].sort();
