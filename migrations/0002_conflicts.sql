-- feedsync schema, version 2: conflicts.
-- An event id the service served again with other content. The first version
-- stays in events (ids are unique at the service); every other version is
-- recorded here once, for an operator to look at.
CREATE TABLE conflicts (
  id            bigserial   PRIMARY KEY,
  source        text        COLLATE "C" NOT NULL,
  event_id      text        COLLATE "C" NOT NULL,
  -- SHA-256 (lowercase hex) of the kept version and of this one, each as the text in raw.
  first_sha256  text        NOT NULL,
  second_sha256 text        NOT NULL,
  -- This version: {id, type, created_at (UTC), data} as jsonb prints it.
  raw           text        NOT NULL,
  received_via  text        NOT NULL CHECK (received_via IN ('feed', 'webhook')),
  received_at   timestamptz NOT NULL DEFAULT now(),
  UNIQUE (source, event_id, second_sha256)
);
