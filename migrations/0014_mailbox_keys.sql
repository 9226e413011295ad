-- feedsync schema, version 14: addresses keyed by mailbox, and "do not send" wins in the
-- clock-skew window (docs/DATA.md, The client's own records).
--
-- 1. A contact event dated later than its arrival ranks at its arrival, no longer at its
--    own date: rows written before rank from the time they were written.
UPDATE contact_status SET ranked_at = updated_at WHERE ranked_at > updated_at;

-- 2. Keys are mailboxes now: one bare address (`Name <a@x>` is a@x; "a@x, b@y" is two),
--    its domain folded as mail is routed (src/store/mailboxes.ts: UTS-46 to ASCII, no
--    trailing dot). The rows keyed before are keyed again from their old key, as far
--    as SQL can fold a domain: compatibility forms (fullwidth letters, U+3002 and the
--    other full stops), the marks UTS-46 ignores, lower case, the trailing dot. A domain
--    that stays outside ASCII (an internationalised one: punycode is not done here)
--    keeps its Unicode spelling, which `send` and `suppressions remove` look up beside
--    the punycode one. Only rows whose key may change are touched.
CREATE OR REPLACE FUNCTION pg_temp.fold_domain(domain text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT rtrim(lower(translate(regexp_replace(normalize(domain, NFKC),
    '[\u034F\u180B-\u180D\u180F\uFE00-\uFE0F\U000E0100-\U000E01EF]', '', 'g'), E'\u3002', '.')), '.')
$$;
CREATE OR REPLACE FUNCTION pg_temp.mailbox_keys(key text) RETURNS SETOF text
LANGUAGE sql IMMUTABLE AS $$
  SELECT address_key(CASE WHEN m IS NULL THEN a ELSE m[1] || '@' || pg_temp.fold_domain(m[2]) END)
  FROM regexp_split_to_table(key, '[,;]') AS p
  CROSS JOIN LATERAL (SELECT coalesce(substring(p FROM '<([^<>]*)>[^<>]*$'),
    regexp_replace(p, '\([^()]*\)', '', 'g')) AS a) x
  CROSS JOIN LATERAL (SELECT regexp_match(a, '^(.*)@([^@]*)$') AS m) y
  WHERE a <> ''
$$;
CREATE TEMP TABLE contact_rekeyed ON COMMIT DROP AS
  SELECT c.source, k.email, c.status, c.last_event_id, c.last_event_at, c.ranked_at, c.updated_at
  FROM contact_status c CROSS JOIN LATERAL pg_temp.mailbox_keys(c.email) AS k(email)
  WHERE c.email ~ '[<>,;()]|[.]$|[^\x01-\x7f]' AND k.email IS NOT NULL;
DELETE FROM contact_status WHERE email ~ '[<>,;()]|[.]$|[^\x01-\x7f]';
-- Spellings that now share a key merge into the latest of them.
INSERT INTO contact_status AS c (source, email, status, last_event_id, last_event_at, ranked_at, updated_at)
  SELECT DISTINCT ON (source, email) source, email, status, last_event_id, last_event_at, ranked_at, updated_at
  FROM contact_rekeyed
  ORDER BY source, email, ranked_at DESC, last_event_id COLLATE "C" DESC
  ON CONFLICT (source, email) DO UPDATE SET status = excluded.status, last_event_id = excluded.last_event_id,
    last_event_at = excluded.last_event_at, ranked_at = excluded.ranked_at
  WHERE (excluded.ranked_at, excluded.last_event_id) > (c.ranked_at, c.last_event_id);

CREATE TEMP TABLE suppression_rekeyed ON COMMIT DROP AS
  SELECT s.source, k.address, s.reason, s.event_id, s.at, s.updated_at
  FROM suppressions s CROSS JOIN LATERAL pg_temp.mailbox_keys(s.address) AS k(address)
  WHERE s.address ~ '[<>,;()]|[.]$|[^\x01-\x7f]' AND k.address IS NOT NULL;
DELETE FROM suppressions WHERE address ~ '[<>,;()]|[.]$|[^\x01-\x7f]';
-- Every row stands on its new key (none is lost: an unsubscribe removed by hand stays
-- removed); of rows that now share one, the earliest event of the reason.
INSERT INTO suppressions AS s (source, address, reason, event_id, at, updated_at)
  SELECT DISTINCT ON (source, address, reason) source, address, reason, event_id, at, updated_at
  FROM suppression_rekeyed
  ORDER BY source, address, reason, at, event_id COLLATE "C"
  ON CONFLICT (source, address, reason) DO UPDATE SET event_id = excluded.event_id, at = excluded.at
  WHERE (excluded.at, excluded.event_id) < (s.at, s.event_id);
-- Through a transaction pooler the server session, and its pg_temp, outlive this
-- migration: the helpers go with it (and were made with OR REPLACE for the same reason).
DROP FUNCTION pg_temp.mailbox_keys(text);
DROP FUNCTION pg_temp.fold_domain(text);
