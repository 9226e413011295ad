-- feedsync schema, version 6: conflicts.raw becomes jsonb, so that an operator can read a
-- recorded version's fields (raw->>'created_at', raw->'data'). Nothing is lost: raw
-- was already the text that jsonb prints, and jsonb prints a value the same way every
-- time, so first_sha256 and second_sha256 stay the SHA-256 of raw::text.
-- Rewrites the table under an exclusive lock: quick, since conflicts are rare and
-- pruned with the events (RETENTION_DAYS).
ALTER TABLE conflicts ALTER COLUMN raw TYPE jsonb USING raw::jsonb;
