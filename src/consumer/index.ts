/**
 * `import … from 'feedsync/consumer'`: the other end of feedsync's queues. A consumer
 * that applies each event once in the application's own Postgres (`createConsumer`),
 * the same guarantee for an application's own BullMQ Worker (`withInbox`), and the
 * events' types. Nothing here sends mail, and nothing reads the environment at import.
 */

export { FeedsyncError } from '../errors.js';
/** How far along its life each email type puts a message, as feedsync's email_status ranks them. */
export { EMAIL_STATUS_RANK } from '../event-types.js';
export {
  type Consumer,
  type ConsumerOptions,
  createConsumer,
  type EventOfType,
  type Handlers,
} from './consumer.js';
export type {
  ContactEventType,
  EmailData,
  EmailEventType,
  EventOf,
  FeedsyncEvent,
  FeedsyncEventType,
} from './events.js';
export { INBOX_TABLE, type InboxKey, type InboxOptions, migrateInbox, withInbox } from './inbox.js';
