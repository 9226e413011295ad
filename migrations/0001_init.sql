-- feedsync schema, version 1.
-- Runs inside the migrator's transaction with search_path set to DATABASE_SCHEMA,
-- so every name below lands in that schema. Append-only: change the schema in a
-- new numbered file, never here.

-- Identifiers use the "C" collation: byte order, the same on every server, and
-- cheaper to compare than a locale's order in the largest index.

-- Every event stored once per source, whichever way it arrived.
CREATE TABLE events (
  source       text        COLLATE "C" NOT NULL,
  id           text        COLLATE "C" NOT NULL,
  type         text        NOT NULL,
  created_at   timestamptz NOT NULL,
  data         jsonb       NOT NULL,
  received_via text        NOT NULL CHECK (received_via IN ('feed', 'webhook')),
  received_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (source, id)
);

-- Lag and reconcile queries walk one source by time.
CREATE INDEX events_source_created_at_idx ON events (source, created_at);

-- One feed position per source. types NULL means every type.
CREATE TABLE cursors (
  source          text        COLLATE "C" PRIMARY KEY,
  after_id        text,
  types           text[],
  updated_at      timestamptz NOT NULL DEFAULT now(),
  last_success_at timestamptz
);

-- The latest known state of each email. status never moves backwards
-- (sent < delivered < bounced = failed < complained); the applier enforces it.
CREATE TABLE email_status (
  source        text        COLLATE "C" NOT NULL,
  email_id      text        COLLATE "C" NOT NULL,
  status        text        NOT NULL CHECK (status IN ('sent', 'delivered', 'bounced', 'failed', 'complained')),
  last_event_id text        COLLATE "C" NOT NULL,
  last_event_at timestamptz NOT NULL,
  sent_at       timestamptz,
  delivered_at  timestamptz,
  bounced_at    timestamptz,
  complained_at timestamptz,
  failed_at     timestamptz,
  recipients    text[],
  -- The event that recipients came from: the earliest one with a non-empty `to`,
  -- so the result does not depend on the order in which events arrive.
  recipients_event_id text  COLLATE "C",
  recipients_event_at timestamptz,
  updated_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (source, email_id)
);

-- Jobs waiting for BullMQ, written in the same transaction as their events.
CREATE TABLE outbox (
  seq          bigserial   PRIMARY KEY,
  source       text        COLLATE "C" NOT NULL,
  event_id     text        COLLATE "C" NOT NULL,
  queue        text        NOT NULL,
  job_name     text        NOT NULL,
  payload      jsonb       NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  published_at timestamptz,
  UNIQUE (source, event_id)
);

-- The relay reads the backlog in seq order; the index holds only that backlog.
CREATE INDEX outbox_unpublished_idx ON outbox (seq) WHERE published_at IS NULL;
-- Requeue (published since a time) and pruning (published before one) by publish time.
CREATE INDEX outbox_published_at_idx ON outbox (published_at) WHERE published_at IS NOT NULL;

-- Events that could not be stored as such, kept raw, once per source and text.
CREATE TABLE quarantine (
  id          bigserial   PRIMARY KEY,
  source      text        COLLATE "C" NOT NULL,
  raw         text        NOT NULL,
  raw_sha256  text        NOT NULL,
  reason      text        NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (source, raw_sha256)
);
