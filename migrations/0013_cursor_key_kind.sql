-- feedsync schema, version 12: the kind of API key (test or live, from its
-- <service>_test_ / <service>_live_ prefix; never the key itself) a source's cursor was
-- built with. A source's events, cursor and records belong to one account: a key of the
-- other kind under the same source is another account's feed, and the worker refuses it
-- until `feedsync cursor reset --allow-key-change` says the switch is meant.
-- NULL: not recorded yet (a cursor made before this version, or a key of neither
-- kind); the next turn with a key of a known kind records it.
ALTER TABLE cursors ADD COLUMN key_kind text CHECK (key_kind IN ('test', 'live'));
