-- feedsync schema, version 7: conflicts bounded per event id.
-- A sender that serves one id again and again, each time with other content, cost a
-- row per version (a 100 KB body each, kept until the retention). Now each id has one
-- row at most: the first version stays in events, the row holds the newest other
-- version (each new one replaces it), and versions_seen counts every other version
-- recorded, the replaced ones included.
ALTER TABLE conflicts ADD COLUMN versions_seen bigint NOT NULL DEFAULT 1 CHECK (versions_seen > 0);
-- Rows recorded before: the newest of each id stays and counts the others.
UPDATE conflicts k SET versions_seen = n.total
  FROM (SELECT max(id) AS newest, count(*) AS total FROM conflicts GROUP BY source, event_id HAVING count(*) > 1) n
 WHERE k.id = n.newest;
DELETE FROM conflicts k
 WHERE EXISTS (SELECT FROM conflicts o WHERE o.source = k.source AND o.event_id = k.event_id AND o.id > k.id);
ALTER TABLE conflicts DROP CONSTRAINT conflicts_source_event_id_second_sha256_key;
ALTER TABLE conflicts ADD CONSTRAINT conflicts_source_event_id_key UNIQUE (source, event_id);
