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
