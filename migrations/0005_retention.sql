-- feedsync schema, version 5: retention by arrival.
-- Events are pruned by the time they arrived (received_at, Postgres's clock), not by
-- the created_at the feed sent: a date before 1970 or in the year 9999 cannot keep a
-- row for ever, and an event that arrives already old is kept, and so recognised as a
-- duplicate, as long as any other. One index over every source: pruning covers the
-- sources no worker syncs any more too.
CREATE INDEX events_received_at_idx ON events (received_at);
