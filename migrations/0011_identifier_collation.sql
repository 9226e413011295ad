-- feedsync schema, version 11: every identifier in the "C" collation, as 0001 means.
-- leases.source (0004), source_counts.source (0010) and cursors.after_id (0001 itself)
-- were made in the database's default collation. Equality is the same either way; an
-- order is not: the claim's order by source (leases_next_at_idx, 0008) and retention's
-- lock order over source_counts followed the server's locale, where every other
-- identifier keeps byte order, the same on every server.
-- A text column's collation changes without rewriting its rows; the indexes on it (the
-- primary keys, leases_next_at_idx) are rebuilt under an exclusive lock, one row per
-- source: quick.
ALTER TABLE leases ALTER COLUMN source TYPE text COLLATE "C";
ALTER TABLE source_counts ALTER COLUMN source TYPE text COLLATE "C";
ALTER TABLE cursors ALTER COLUMN after_id TYPE text COLLATE "C";
