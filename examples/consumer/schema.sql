-- The consumer's own tables, in the schema named by APP_SCHEMA (default "app").
-- consumer.ts runs this file at start; every statement can run again.

-- One row per event handled: the idempotency key. A job that runs twice (a retry, a
-- requeue, a replayed cursor) finds its row and changes nothing.
CREATE TABLE IF NOT EXISTS processed_events (
  event_key    text        PRIMARY KEY,  -- "<source>/<event id>", the BullMQ job id
  type         text        NOT NULL,
  processed_at timestamptz NOT NULL DEFAULT now()
);

-- The latest known state of each message this application sent, by the service's id.
CREATE TABLE IF NOT EXISTS messages (
  email_id      text        PRIMARY KEY,
  last_event    text        NOT NULL,
  last_event_at timestamptz NOT NULL
);

-- Addresses not to mail again: bounced or complained. Recorded, never acted on here.
CREATE TABLE IF NOT EXISTS suppressed_addresses (
  address   text        PRIMARY KEY,
  reason    text        NOT NULL,   -- email.bounced or email.complained
  event_key text        NOT NULL,
  since     timestamptz NOT NULL
);

-- Newsletter subscriptions, from the contact.* events.
CREATE TABLE IF NOT EXISTS subscriptions (
  address    text        PRIMARY KEY,
  subscribed boolean     NOT NULL,
  changed_at timestamptz NOT NULL
);
