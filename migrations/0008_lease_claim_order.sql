-- feedsync schema, version 8: the claim reads the leases in the order they fall due.
-- A claim takes the rows whose time has come (a free row's due_at, a held row's
-- expires_at; a row never given back is due at once), most overdue first. Over this
-- index it reads only those rows, whatever the number of sources: the claim no longer
-- names the sources of the file (lease rows follow the file, made where missing by
-- each replica), so without it every claim would read every lease row.
CREATE INDEX leases_next_at_idx ON leases (
  (coalesce(CASE WHEN holder IS NULL THEN due_at ELSE expires_at END, '-infinity'::timestamptz)),
  source
);
-- Every turn updates its row twice (claim, give back) and moves its key in this index,
-- so the claim's range (what is due) collects dead entries until a vacuum: vacuum the
-- table after 1,000 of them, whatever its size, not after a fifth of it.
ALTER TABLE leases SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);
