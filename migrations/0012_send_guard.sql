-- feedsync schema, version 12: the send guard holds for every way a person says no.
--
-- 1. One normalisation of addresses, here, for the apply statement and for every
--    command that looks an address up (src/store/address-key.ts calls it): every
--    Unicode white space and format character removed (NBSP, ZWSP, BOM, soft hyphen,
--    bidi marks: the classes White_Space and Cf; test/store/address-key.test.ts holds
--    the list to JavaScript's), then NFC, then lower case (the database's own rules:
--    the default collation, whatever the column's). NULL when empty, or when the value
--    is longer than 320 characters (a longer one would not fit the primary keys).
--    An address of ASCII alone (one byte a character: the common case) takes the cheap
--    path: its only such characters are the six ASCII spaces, and NFC leaves it as it is.
CREATE FUNCTION address_key(value text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN length(value) > 320 THEN NULL
    WHEN octet_length(value) = length(value) THEN NULLIF(lower(translate(value, E' \t\n\u000B\f\r', '')), '')
    ELSE NULLIF(lower(normalize(regexp_replace(value,
    '[\u0009-\u000D\u0020\u0085\u00A0\u00AD\u0600-\u0605\u061C\u06DD\u070F\u0890-\u0891\u08E2\u1680\u180E\u2000-\u200F\u2028-\u202F\u205F-\u2064\u2066-\u206F\u3000\uFEFF\uFFF9-\uFFFB\U000110BD\U000110CD\U00013430-\U0001343F\U0001BCA0-\U0001BCA3\U0001D173-\U0001D17A\U000E0001\U000E0020-\U000E007F]',
    '', 'g'), NFC) COLLATE "default"), '') END
$$;

-- 2. contact_status ranks by ranked_at: the event's created_at, or, for an event dated
--    later than its arrival plus five minutes, its arrival plus five minutes. A date
--    in the future no longer outranks what really happened. Rows written before are
--    ranked the same way, from the time they were written (updated_at).
ALTER TABLE contact_status ADD COLUMN ranked_at timestamptz;
CREATE TEMP TABLE contact_keyed ON COMMIT DROP AS
  SELECT source, address_key(email) AS email, status, last_event_id, last_event_at,
    LEAST(last_event_at, updated_at + interval '5 minutes') AS ranked_at, updated_at
  FROM contact_status
  -- A subscribe dated in the future is no state any more (the statement ignores one):
  -- the address falls back on its events that really happened, below.
  WHERE NOT (status = 'subscribed' AND last_event_at > updated_at + interval '5 minutes');
INSERT INTO contact_keyed
  SELECT e.source, address_key(e.data->>'email'), substr(e.type, 9), e.id, e.created_at,
    LEAST(e.created_at, e.received_at + interval '5 minutes'), e.received_at
  FROM events e JOIN contact_status c ON c.source = e.source
    AND c.status = 'subscribed' AND c.last_event_at > c.updated_at + interval '5 minutes'
    AND address_key(e.data->>'email') = address_key(c.email)
  WHERE e.type IN ('contact.subscribed', 'contact.unsubscribed') AND jsonb_typeof(e.data->'email') = 'string'
    AND NOT (e.type = 'contact.subscribed' AND e.created_at > e.received_at + interval '5 minutes');
DELETE FROM contact_status;
-- Spellings that now share a key merge into the latest of them.
INSERT INTO contact_status (source, email, status, last_event_id, last_event_at, ranked_at, updated_at)
  SELECT DISTINCT ON (source, email) source, email, status, last_event_id, last_event_at, ranked_at, updated_at
  FROM contact_keyed WHERE email IS NOT NULL
  ORDER BY source, email, ranked_at DESC, last_event_id DESC;
ALTER TABLE contact_status ALTER COLUMN ranked_at SET NOT NULL;

-- 3. suppressions: one row per reason an address has, not only the highest, so that
--    lifting a bounce leaves an unsubscribe standing. The unsubscribes are rebuilt
--    from contact_status: every address whose latest state is unsubscribed is refused
--    again, also where the single row of before held a bounce or had been removed.
CREATE TEMP TABLE suppression_keyed ON COMMIT DROP AS
  SELECT source, address_key(address) AS address, reason, event_id, at, updated_at
  FROM suppressions WHERE reason <> 'unsubscribed';
DELETE FROM suppressions;
ALTER TABLE suppressions DROP CONSTRAINT suppressions_pkey;
ALTER TABLE suppressions ADD PRIMARY KEY (source, address, reason);
INSERT INTO suppressions (source, address, reason, event_id, at, updated_at)
  SELECT DISTINCT ON (source, address, reason) source, address, reason, event_id, at, updated_at
  FROM suppression_keyed WHERE address IS NOT NULL
  ORDER BY source, address, reason, at, event_id;
INSERT INTO suppressions (source, address, reason, event_id, at)
  SELECT source, email, 'unsubscribed', last_event_id, last_event_at FROM contact_status
  WHERE status = 'unsubscribed';
