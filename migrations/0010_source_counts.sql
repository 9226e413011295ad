-- feedsync schema, version 10: what `status` and the metrics read of each source, kept
-- where events are written instead of counted from them. At 100,000 sources a
-- count(*) and a max(created_at) over events per source took seconds; one row per
-- source, updated by the statement that stores the events (apply-statement.ts) and by
-- retention's deletes (retention.ts), is read in one pass.
-- A table of its own, not columns of cursors: a webhook delivery stores events of a
-- source that may have no cursor yet, and the page applier's statement already updates
-- the cursor row (one statement cannot update a row twice).
CREATE TABLE source_counts (
  source text PRIMARY KEY,
  -- Rows of this source in events.
  events_stored bigint NOT NULL DEFAULT 0,
  -- The newest created_at among them that was not in the future when it was stored:
  -- the cursor lag is now() minus this. NULL while nothing is stored.
  newest_event_at timestamptz
);
-- What is stored already; events a worker of an older release stores during a rolling
-- update are not counted (nothing else is affected).
INSERT INTO source_counts (source, events_stored, newest_event_at)
SELECT source, count(*), max(created_at) FILTER (WHERE created_at <= now()) FROM events GROUP BY source;
