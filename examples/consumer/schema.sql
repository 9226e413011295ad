-- The consumer's own tables, in the schema named by APP_SCHEMA (default
-- "feedsync_example_consumer"), which consumer.ts creates and marks as its own.
-- consumer.ts runs this file at start; every statement can run again.

-- Which events were handled is recorded by feedsync/consumer in its own table,
-- feedsync_inbox, made in the same schema by consumer.migrate().

-- The latest known state of each message this application sent: by account (the
-- source, feedsync's cursor key) and the service's id, since two accounts may use
-- the same ids. The latest event wins; at the same instant the higher rank (sent 1,
-- delivered 2, bounced or failed 3, complained 4, other types 0), then the event id.
CREATE TABLE IF NOT EXISTS messages (
  source          text        COLLATE "C" NOT NULL,
  email_id        text        COLLATE "C" NOT NULL,
  last_event      text        NOT NULL,
  last_event_rank smallint    NOT NULL,
  last_event_id   text        COLLATE "C" NOT NULL,
  last_event_at   timestamptz NOT NULL,
  PRIMARY KEY (source, email_id)
);

-- Addresses not to mail again: bounced or complained. Recorded, never acted on here.
CREATE TABLE IF NOT EXISTS suppressed_addresses (
  address   text        PRIMARY KEY,
  reason    text        NOT NULL,   -- email.bounced or email.complained
  event_key text        NOT NULL,   -- "<source>/<event id>"
  since     timestamptz NOT NULL
);

-- Newsletter subscriptions, from the contact.* events.
CREATE TABLE IF NOT EXISTS subscriptions (
  address    text        PRIMARY KEY,
  subscribed boolean     NOT NULL,
  changed_at timestamptz NOT NULL
);
