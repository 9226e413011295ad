-- feedsync schema, version 3: a lighter outbox.
-- A job's data is its event ({source, id, type, created_at, data}), which the events
-- table already holds: a copy in every outbox row wrote each event twice, and a third
-- time when the row was marked published (an UPDATE writes the whole row anew). New
-- rows leave payload NULL and the relay reads the event; rows written before keep
-- their copy, and the relay publishes that.
ALTER TABLE outbox ALTER COLUMN payload DROP NOT NULL;

-- The unique index on (source, event_id) cost more than any other per row, on the
-- insert and again on the mark (about 7 µs of Postgres CPU per event in all). Rows are
-- written only for events the same statement inserted, so an event has one row; an
-- event pruned by EVENTS_RETENTION_DAYS and served again is stored again, and gets a
-- job again.
ALTER TABLE outbox DROP CONSTRAINT outbox_source_event_id_key;
