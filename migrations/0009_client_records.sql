-- feedsync schema, version 9: the client's own records of its contacts and of the
-- addresses it should not send to, kept by the same statement as email_status
-- (src/store/apply-statement.ts). Addresses are keyed trimmed and lower-cased; the
-- statement makes the key (src/store/address-key.ts) and so does every reader.

-- The latest contact event of each address: the one with the greatest created_at,
-- then id, whatever the order in which events arrive.
CREATE TABLE contact_status (
  source        text        COLLATE "C" NOT NULL,
  email         text        COLLATE "C" NOT NULL,
  status        text        NOT NULL CHECK (status IN ('subscribed', 'unsubscribed')),
  last_event_id text        COLLATE "C" NOT NULL,
  last_event_at timestamptz NOT NULL,
  updated_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (source, email)
);

-- Addresses not to send to, with the reason and the event that decided it. A bounce or
-- a complaint stays until removed by hand (feedsync suppressions remove); an
-- unsubscribe is there while the address's latest contact event is contact.unsubscribed.
-- Ranked complained > bounced > unsubscribed; between equal reasons the earliest event
-- (created_at, then id) stands, except for unsubscribed, where it is the latest: the
-- one contact_status holds.
CREATE TABLE suppressions (
  source     text        COLLATE "C" NOT NULL,
  address    text        COLLATE "C" NOT NULL,
  reason     text        NOT NULL CHECK (reason IN ('bounced', 'complained', 'unsubscribed')),
  event_id   text        COLLATE "C" NOT NULL,
  at         timestamptz NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (source, address)
);
