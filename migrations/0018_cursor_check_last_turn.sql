-- feedsync schema, version 18: what a turn checks before it trusts the feed under a
-- cursor. At each commit that moves a cursor onto an event it stored, the cursor keeps
-- the id of the event before that one (check_before; NULL: the start of the feed) and a
-- digest of that event's content (check_digest). The next turn's first request reads
-- from check_before, so the cursor's event comes back first, and compares it: a feed
-- that serves it with other content, or not at all, is not the feed the source was
-- synced from (a simulator restarted, another account's key), and nothing is stored.
-- Read with the lease, written by the commit: no statement of its own.
-- check_digest NULL: nothing to check (the cursor's event was not stored, or the
-- cursor was set by a command).
ALTER TABLE cursors ADD COLUMN check_before text COLLATE "C", ADD COLUMN check_digest text;

-- Whether a source's last turn was a once run's (a CronJob's) or a watch's: its due time
-- is what a watch goes by, so where only once runs turn it, `status` shows no "next
-- turn" time and neither it nor feedsync_sources_overdue calls it overdue.
-- NULL: not recorded yet (no turn since this version).
ALTER TABLE leases ADD COLUMN last_turn text CHECK (last_turn IN ('once', 'watch'));
