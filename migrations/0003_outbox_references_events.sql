-- feedsync schema, version 3: outbox rows reference their event.
-- A job's data is its event ({source, id, type, created_at, data}), which the events
-- table already holds: a copy in every outbox row wrote each event twice, and a third
-- time when the row was marked published (an UPDATE writes the whole row anew). New
-- rows leave payload NULL and the relay reads the event; rows written before keep
-- their copy, and the relay publishes that.
ALTER TABLE outbox ALTER COLUMN payload DROP NOT NULL;
