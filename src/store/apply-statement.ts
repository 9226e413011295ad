import { EMAIL_EVENT_TYPES, EMAIL_STATUS_RANK, type EmailEventType } from '../event-types.js';
import { addressKeySql, CONTACT_CLOCK_SKEW } from './address-key.js';
import { FOREIGN_FEED_MIN } from './foreign-feed.js';

/**
 * The page applier's single statement: a chain of data-modifying CTEs that stores a
 * whole batch in one round trip (one statement is one transaction).
 *
 *   lease the writer's lease row, when it names a fencing token: FOR KEY SHARE, so that
 *         a worker taking the source over (FOR UPDATE SKIP LOCKED, lease.ts) skips it
 *         until this commit ends, while the holder's own renewal (an UPDATE of no key
 *         column) does not wait behind it
 *   held  true when no token is named, or the lease still has the writer's token
 *   clash per page of a feed batch ($12), its events stored before with other content
 *   alien the first page where they are at least FOREIGN_FEED_MIN and more than half of
 *         the page: another account's feed (foreign-feed.ts), which stores nothing
 *   cur   compare-and-set of the cursor (feed batches only), gated on held and no alien page;
 *         locks the cursor row
 *   go    held, no alien page, and no cursor to move or the compare-and-set hit its row
 *   ins   events, ON CONFLICT DO NOTHING, gated on go; RETURNING the new ones
 *   mail  the new email.* events that carry a string email_id
 *   fold  one row per email, so that one upsert per email suffices (no joins: a
 *         batch may hold thousands of events)
 *   up    email_status upsert that never moves backwards
 *   contact  the new contact.* events, keyed by data.email (address-key.ts; NULL: no key),
 *         each ranked at its created_at, or at now() plus the clock skew when dated later
 *   latest   the latest (ranked_at, id) of each address's contact events in the batch,
 *         leaving out a subscribe dated beyond the skew
 *   cs    contact_status upsert where that is later than the stored one; RETURNING the
 *         contacts whose state changed
 *   hard  per recipient address and reason (bounced, complained) of the new
 *         email.bounced and email.complained events, the earliest event
 *   sup   suppressions upsert, one row per address and reason: the hard ones where
 *         earlier than the stored row, and the contacts that changed to unsubscribed
 *   lift  the unsubscribe suppressions of the contacts that changed to subscribed
 *   ob    outbox rows for the new routed events, in feed order (no copy of the event)
 *   q     quarantine rows, gated on go
 *   seen  the batch's events (and repeats within it) whose id was stored before
 *   other those of them whose content differs from the version kept
 *   newest per id, the batch's last other version, and how many versions are new to
 *         the id's conflicts row (not the one it holds: a retried delivery)
 *   conf  conflicts: one row per id, holding the newest other version and counting
 *         every version recorded (versions_seen), so an id served again and again
 *         with other content costs one row
 *   counted  the source's row of source_counts: events stored, the newest one's date
 *         (read by `status` and the metrics); written last, so its row lock is the
 *         last one taken, held only until the commit
 *
 * Every write depends on go, so a lost lease or a lost compare-and-set writes nothing
 * at all: the same outcome as a rollback, without a second round trip.
 *
 * Parameters: $1 source, $2 received_via, $3 the batch's unique events as one JSON
 * array of {id, type, created_at, data} (one JSON.stringify in the worker, one jsonb
 * parse here: far cheaper than six text arrays), $4 a JSON object from event type
 * to [queue, job name] (types without a queue are absent), $5 whether a cursor
 * moves, $6 its expected after_id, $7 the new one, $8 quarantined raw texts, $9
 * their reasons, $10 the repeats of an id within the batch, like $3 (usually
 * none), $11 the writer's fencing token (NULL: no lease to check, as for a
 * webhook delivery or reconcile, which never move a cursor), $12 the ordinal in $3 of
 * the first event of each page, ascending (empty: no page is checked for conflicts, as
 * for a webhook delivery). Besides whether the
 * lease held and the counts it returns the ids of the batch that were already
 * stored (usually none), not the thousands that were not, and the outbox rows it
 * added (seq and event id, in seq order) for the relay to publish from memory.
 *
 * Content is compared as Postgres sees it (the instant of created_at, data as
 * jsonb), so key order or an offset written differently is no conflict. Of the
 * counts, conflicts is the versions new to their ids' rows and first_conflicts the
 * ids whose row is new (their first conflict).
 */
/*
 * Why contact_status and suppressions come out the same in any order of arrival (the
 * rules of docs/DATA.md): contact_status keeps the maximum by (ranked_at, id), and each
 * hard suppression the earliest event of its reason: both are merges that ignore order
 * and grouping (ranked_at depends on the time of arrival only for events dated in the
 * future). An unsubscribe suppression mirrors the contact's state, beside any hard
 * reason: it is written or lifted only when that state changes (cs returns the row).
 * sup and lift never name the same row, and neither names a row twice: Postgres
 * cannot modify one row twice in a statement.
 */
export function applyStatement(quotedSchema: string): string {
  // Made once per schema: a worker builds an applier for every turn of every source.
  let text = statements.get(quotedSchema);
  if (text === undefined) {
    text = buildStatement(quotedSchema);
    statements.set(quotedSchema, text);
  }
  return text;
}

const statements = new Map<string, string>();

/** `CASE <column> WHEN '<value of each email type>' THEN <its rank> … END` (the types are constants of this release). */
function rankCase(column: string, valueFor: (type: EmailEventType) => string): string {
  const whens = EMAIL_EVENT_TYPES.map((t) => `WHEN '${valueFor(t)}' THEN ${EMAIL_STATUS_RANK[t]}`);
  return `(CASE ${column} ${whens.join(' ')} END)`;
}

function buildStatement(quotedSchema: string): string {
  const s = quotedSchema;
  // A status is its type without `email.`: the rank of each from the one list of them.
  const rank = (status: string) => rankCase(status, (type) => type.slice('email.'.length));
  // The new status stands when it ranks higher, or ranks the same and is the earlier event.
  const statusWins =
    `(${rank('excluded.status')} > ${rank('e.status')} OR (${rank('excluded.status')} = ${rank('e.status')} ` +
    `AND (excluded.last_event_at, excluded.last_event_id) < (e.last_event_at, e.last_event_id)))`;
  // Recipients come from the earliest event that had any.
  const recipientsWin =
    `(excluded.recipients_event_id IS NOT NULL AND (e.recipients_event_id IS NULL OR ` +
    `(excluded.recipients_event_at, excluded.recipients_event_id) < (e.recipients_event_at, e.recipients_event_id)))`;
  const pick = (when: string, column: string) =>
    `${column} = CASE WHEN ${when} THEN excluded.${column} ELSE e.${column} END`;
  const earliest = (column: string) => `${column} = LEAST(e.${column}, excluded.${column})`;
  const byStatus = `ORDER BY rank DESC, created_at, id COLLATE "C"`;
  const byTime = `ORDER BY created_at, id COLLATE "C"`;
  const firstOf = (status: string) => `min(created_at) FILTER (WHERE status = '${status}')`;
  // One version of an event as text, the same whatever the session's time zone.
  const version = (t: string, createdAt: string) =>
    `jsonb_build_object('id', ${t}.id, 'type', ${t}.type, 'created_at', ` +
    `to_char(${createdAt} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), 'data', ${t}.data)::text`;
  const sha = (text: string) => `encode(sha256(convert_to(${text}, 'UTF8')), 'hex')`;
  return `
WITH input AS (
  SELECT t.id, t.type, t.created_at, t.data,
    $4::jsonb -> t.type ->> 0 AS queue, $4::jsonb -> t.type ->> 1 AS job_name, t.ord
  FROM ROWS FROM (jsonb_to_recordset($3::jsonb) AS (id text, type text, created_at text, data jsonb))
    WITH ORDINALITY AS t(id, type, created_at, data, ord)
), lease AS (
  SELECT FROM ${s}.leases WHERE $11::bigint IS NOT NULL AND source = $1::text AND token = $11::bigint
  FOR KEY SHARE
), held AS (
  SELECT $11::bigint IS NULL OR EXISTS (SELECT FROM lease) AS ok
), clash AS (
  -- The snapshot is the statement's: what was stored before this batch. A subquery per
  -- event, one probe of the primary key each: a join could be planned as a scan of
  -- every event of the source.
  SELECT width_bucket(d.ord, $12::int[]) AS page, count(*) AS n
  FROM (
    SELECT i.ord, (
      SELECT (e.type, e.created_at, e.data) IS DISTINCT FROM (i.type, i.created_at::timestamptz, i.data)
      FROM ${s}.events e WHERE e.source = $1::text AND e.id = i.id
    ) AS differs
    FROM input i WHERE cardinality($12::int[]) > 0
  ) d
  WHERE d.differs
  GROUP BY 1
), alien AS (
  SELECT c.n, p.size FROM clash c
  CROSS JOIN LATERAL (SELECT count(*) AS size FROM input WHERE width_bucket(ord, $12::int[]) = c.page) p
  WHERE c.n >= ${FOREIGN_FEED_MIN} AND c.n * 2 > p.size
  ORDER BY c.page LIMIT 1
), cur AS (
  UPDATE ${s}.cursors SET after_id = $7::text, updated_at = now()
  WHERE $5::boolean AND (SELECT ok FROM held) AND NOT EXISTS (SELECT FROM alien)
    AND source = $1::text AND after_id IS NOT DISTINCT FROM $6::text
  RETURNING 1
), go AS (
  SELECT (SELECT ok FROM held) AND NOT EXISTS (SELECT FROM alien)
    AND (NOT $5::boolean OR EXISTS (SELECT FROM cur)) AS ok
), ins AS (
  INSERT INTO ${s}.events AS ev (source, id, type, created_at, data, received_via)
  SELECT $1::text, id, type, created_at::timestamptz, data, $2::text FROM input
  WHERE (SELECT ok FROM go)
  ORDER BY ord
  ON CONFLICT (source, id) DO NOTHING
  RETURNING ev.id, ev.type, ev.created_at, ev.data
), mail AS MATERIALIZED (
  SELECT id, created_at, substr(type, 7) AS status, data->>'email_id' AS email_id,
    ${rankCase('type', (type) => type)} AS rank,
    -- The string addresses of data.to as a jsonb array, NULL when there are none.
    (SELECT jsonb_agg(a) FROM jsonb_array_elements(CASE jsonb_typeof(data->'to')
        WHEN 'array' THEN data->'to' WHEN 'string' THEN jsonb_build_array(data->'to') ELSE '[]' END) AS a
      WHERE jsonb_typeof(a) = 'string') AS recipients
  FROM ins
  WHERE type IN (${EMAIL_EVENT_TYPES.map((t) => `'${t}'`).join(', ')})
    AND jsonb_typeof(data->'email_id') = 'string'
), fold AS (
  SELECT email_id,
    (array_agg(status ${byStatus}))[1] AS status,
    (array_agg(id ${byStatus}))[1] AS last_event_id,
    (array_agg(created_at ${byStatus}))[1] AS last_event_at,
    ${firstOf('sent')} AS sent_at, ${firstOf('delivered')} AS delivered_at,
    ${firstOf('bounced')} AS bounced_at, ${firstOf('complained')} AS complained_at,
    ${firstOf('failed')} AS failed_at,
    (array_agg(recipients ${byTime}) FILTER (WHERE recipients IS NOT NULL))[1] AS recipients,
    (array_agg(id ${byTime}) FILTER (WHERE recipients IS NOT NULL))[1] AS recipients_event_id,
    (array_agg(created_at ${byTime}) FILTER (WHERE recipients IS NOT NULL))[1] AS recipients_event_at
  FROM mail GROUP BY email_id
), up AS (
  INSERT INTO ${s}.email_status AS e (source, email_id, status, last_event_id, last_event_at,
    sent_at, delivered_at, bounced_at, complained_at, failed_at,
    recipients, recipients_event_id, recipients_event_at)
  SELECT $1::text, f.email_id, f.status, f.last_event_id, f.last_event_at,
    f.sent_at, f.delivered_at, f.bounced_at, f.complained_at, f.failed_at,
    CASE WHEN f.recipients IS NOT NULL THEN ARRAY(SELECT jsonb_array_elements_text(f.recipients)) END,
    f.recipients_event_id, f.recipients_event_at
  FROM fold f
  -- A fixed order keeps two writers of overlapping emails from deadlocking.
  ORDER BY f.email_id
  ON CONFLICT (source, email_id) DO UPDATE SET
    ${pick(statusWins, 'status')}, ${pick(statusWins, 'last_event_id')}, ${pick(statusWins, 'last_event_at')},
    ${earliest('sent_at')}, ${earliest('delivered_at')}, ${earliest('bounced_at')},
    ${earliest('complained_at')}, ${earliest('failed_at')},
    ${pick(recipientsWin, 'recipients')}, ${pick(recipientsWin, 'recipients_event_id')},
    ${pick(recipientsWin, 'recipients_event_at')},
    updated_at = now()
  RETURNING 1
), contact AS MATERIALIZED (
  SELECT id, created_at, substr(type, 9) AS status,
    CASE WHEN jsonb_typeof(data->'email') = 'string' THEN ${addressKeySql(s, `data->>'email'`)} END AS email,
    LEAST(created_at, now() + ${CONTACT_CLOCK_SKEW}) AS ranked_at
  FROM ins WHERE type IN ('contact.subscribed', 'contact.unsubscribed')
), latest AS (
  SELECT DISTINCT ON (email) email, status, id, created_at, ranked_at FROM contact
  -- A subscribe dated beyond the skew is no state: it would outrank every real unsubscribe.
  WHERE email IS NOT NULL AND NOT (status = 'subscribed' AND created_at > ranked_at)
  ORDER BY email, ranked_at DESC, id COLLATE "C" DESC
), cs AS (
  INSERT INTO ${s}.contact_status AS c (source, email, status, last_event_id, last_event_at, ranked_at)
  SELECT $1::text, email, status, id, created_at, ranked_at FROM latest
  -- Sorted, as every upsert here, so that two writers of the same addresses cannot deadlock.
  ORDER BY email
  ON CONFLICT (source, email) DO UPDATE SET status = excluded.status, last_event_id = excluded.last_event_id,
    last_event_at = excluded.last_event_at, ranked_at = excluded.ranked_at, updated_at = now()
  WHERE (excluded.ranked_at, excluded.last_event_id) > (c.ranked_at, c.last_event_id)
  RETURNING c.email, c.status, c.last_event_id, c.last_event_at
), hard AS MATERIALIZED (
  SELECT DISTINCT ON (address, reason) address, reason, id, created_at FROM (
    SELECT ${addressKeySql(s, 'a.address')} AS address, substr(n.type, 7) AS reason, n.id, n.created_at
    FROM ins n CROSS JOIN LATERAL (
      SELECT r #>> '{}' AS address FROM jsonb_array_elements(CASE jsonb_typeof(n.data->'to')
          WHEN 'array' THEN n.data->'to' WHEN 'string' THEN jsonb_build_array(n.data->'to') ELSE '[]' END) AS r
        WHERE jsonb_typeof(r) = 'string') a
    WHERE n.type IN ('email.bounced', 'email.complained')
  ) r
  WHERE address IS NOT NULL
  ORDER BY address, reason, created_at, id COLLATE "C"
), sup AS (
  INSERT INTO ${s}.suppressions AS s (source, address, reason, event_id, at)
  SELECT $1::text, address, reason, id, created_at FROM (
    SELECT address, reason, id, created_at FROM hard
    UNION ALL
    SELECT email, status, last_event_id, last_event_at FROM cs WHERE status = 'unsubscribed'
  ) x
  ORDER BY address, reason
  ON CONFLICT (source, address, reason) DO UPDATE SET event_id = excluded.event_id,
    at = excluded.at, updated_at = now()
  -- An unsubscribe row follows the contact's latest event (cs returned it because it
  -- won); a bounce or a complaint keeps the earliest event of its reason.
  WHERE excluded.reason = 'unsubscribed' OR (excluded.at, excluded.event_id) < (s.at, s.event_id)
  RETURNING 1
), lift AS (
  -- A row written since this statement began is not seen here: the rule's one gap,
  -- on the side of not sending (docs/DATA.md, Suppressions).
  DELETE FROM ${s}.suppressions s USING cs
  WHERE cs.status = 'subscribed' AND s.source = $1::text AND s.address = cs.email AND s.reason = 'unsubscribed'
  RETURNING 1
), ob AS (
  -- No payload: the job's data is the event, read back from events only when a crash
  -- left the row behind (the worker publishes what it just committed from memory).
  INSERT INTO ${s}.outbox (source, event_id, queue, job_name)
  SELECT $1::text, i.id, i.queue, i.job_name
  FROM ins n JOIN input i ON i.id = n.id
  WHERE i.queue IS NOT NULL
  -- seq is drawn in this order, so the relay publishes in feed order.
  ORDER BY i.ord
  RETURNING seq, event_id
), q AS (
  INSERT INTO ${s}.quarantine (source, raw, raw_sha256, reason)
  SELECT $1::text, raw, encode(sha256(convert_to(raw, 'UTF8')), 'hex'), reason
  FROM unnest($8::text[], $9::text[]) AS r(raw, reason)
  WHERE (SELECT ok FROM go)
  ON CONFLICT (source, raw_sha256) DO NOTHING
  RETURNING 1
), seen AS MATERIALIZED (
  SELECT i.id, i.type, i.created_at::timestamptz AS created_at, i.data, true AS first, i.ord AS pos
  FROM input i WHERE NOT EXISTS (SELECT FROM ins n WHERE n.id = i.id)
  UNION ALL
  SELECT r.id, r.type, r.created_at::timestamptz, r.data, false, jsonb_array_length($3::jsonb) + r.ord
  FROM ROWS FROM (jsonb_to_recordset($10::jsonb) AS (id text, type text, created_at text, data jsonb))
    WITH ORDINALITY AS r(id, type, created_at, data, ord)
), other AS (
  SELECT d.id, d.pos, ${sha(version('f', 'f.created_at'))} AS first_sha256,
    ${sha(version('d', 'd.created_at'))} AS sha256, ${version('d', 'd.created_at')} AS raw
  FROM seen d CROSS JOIN LATERAL (
    -- The version kept: the stored one, else (a repeat within the batch) the batch's first.
    SELECT e.id, e.type, e.created_at, e.data FROM ${s}.events e WHERE e.source = $1::text AND e.id = d.id
    UNION ALL
    SELECT i.id, i.type, i.created_at::timestamptz, i.data FROM input i WHERE NOT d.first AND i.id = d.id
    LIMIT 1
  ) f
  WHERE (SELECT ok FROM go)
    AND (f.type, f.created_at, f.data) IS DISTINCT FROM (d.type, d.created_at, d.data)
), newest AS (
  SELECT o.id, (array_agg(o.first_sha256 ORDER BY o.pos DESC))[1] AS first_sha256,
    (array_agg(o.sha256 ORDER BY o.pos DESC))[1] AS sha256, (array_agg(o.raw ORDER BY o.pos DESC))[1] AS raw,
    -- The version the row holds now coming again (a retried delivery) is no new one.
    count(DISTINCT o.sha256) FILTER (WHERE o.sha256 IS DISTINCT FROM k.second_sha256) AS added
  FROM other o LEFT JOIN ${s}.conflicts k ON k.source = $1::text AND k.event_id = o.id
  GROUP BY o.id, k.second_sha256
), conf AS (
  INSERT INTO ${s}.conflicts AS k (source, event_id, first_sha256, second_sha256, raw, received_via, versions_seen)
  SELECT $1::text, id, first_sha256, sha256, raw::jsonb, $2::text, added FROM newest WHERE added > 0
  ORDER BY id
  ON CONFLICT (source, event_id) DO UPDATE SET second_sha256 = excluded.second_sha256, raw = excluded.raw,
    received_via = excluded.received_via, received_at = now(),
    versions_seen = k.versions_seen + excluded.versions_seen
  -- xmax is 0 on a row this statement inserted: the id's first conflict.
  RETURNING xmax = 0 AS first
), counted AS (
  INSERT INTO ${s}.source_counts AS c (source, events_stored, newest_event_at)
  SELECT $1::text, count(*), max(created_at) FILTER (WHERE created_at <= now()) FROM ins
  HAVING count(*) > 0
  ON CONFLICT (source) DO UPDATE SET events_stored = c.events_stored + excluded.events_stored,
    newest_event_at = GREATEST(c.newest_event_at, excluded.newest_event_at)
)
SELECT (SELECT ok FROM go) AS ok, (SELECT ok FROM held) AS held,
  (SELECT n FROM alien)::int AS alien_conflicts, (SELECT size FROM alien)::int AS alien_events,
  ARRAY(SELECT id FROM seen WHERE first) AS stored_before,
  (SELECT count(*) FROM q)::int AS quarantined,
  (SELECT coalesce(sum(added), 0) FROM newest)::int AS conflicts,
  (SELECT count(*) FILTER (WHERE first) FROM conf)::int AS first_conflicts,
  -- JSON, not arrays: JSON.parse reads a thousand strings far faster than the driver's array parser.
  (SELECT coalesce(json_agg(seq::text ORDER BY seq), '[]') FROM ob) AS outbox_seqs,
  (SELECT coalesce(json_agg(event_id ORDER BY seq), '[]') FROM ob) AS outbox_ids,
  (SELECT count(*) FROM up)::int AS projected,
  (SELECT count(*) FROM contact WHERE email IS NULL)::int AS contacts_without_email`;
}
