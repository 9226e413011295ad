-- feedsync schema, version 4: leases instead of session advisory locks.
-- A session advisory lock lives as long as the session that took it: a worker that
-- freezes or is cut off keeps it until Postgres notices the dead peer (about two hours
-- with the default keepalives), and behind a transaction pooler it does not hold at
-- all. A lease is a row instead: who holds the source, a fencing token that grows with
-- every new holder, and when the holding ends unless renewed. Its clock is Postgres's
-- now(), never a worker's.
CREATE TABLE leases (
  source text PRIMARY KEY,
  -- host name and pid of the holder; NULL while nobody holds it.
  holder text,
  -- 0 before the first holder; every take adds one. A commit names its token, and a
  -- token that is no longer the row's commits nothing.
  token bigint NOT NULL DEFAULT 0,
  -- The holding ends then unless renewed; NULL while free.
  expires_at timestamptz,
  -- When the source is next due in watch mode (set when a turn gives the lease back,
  -- later after failures); NULL: due now.
  due_at timestamptz,
  -- Turns in a row that failed, for the back-off of due_at; 0 after a good turn.
  failures integer NOT NULL DEFAULT 0,
  -- Why the last turn failed (one line, no secrets), for `status`; NULL after a good one.
  last_error text,
  taken_at timestamptz
);
