import { contactStatus, emailStatus, suppressions } from './apply-projections.js';
import { FOREIGN_FEED_MIN } from './foreign-feed.js';

/**
 * The page applier's single statement: a chain of data-modifying CTEs that stores a
 * whole batch in one round trip (one statement is one transaction). `buildStatement`
 * lists its parts in the order of the chain, one function per record they maintain.
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
 * for a webhook delivery), $13 and $14 the cursor's check_before and check_digest (the
 * cursor's event as the next turn checks it; NULL: no check). Besides whether the
 * lease held and the counts it returns the ids of the batch that were already
 * stored (usually none), not the thousands that were not, and the outbox rows it
 * added (seq and event id, in seq order) for the relay to publish from memory.
 *
 * Content is compared as Postgres sees it (the instant of created_at, data as
 * jsonb), so key order or an offset written differently is no conflict. Of the
 * counts, conflicts is the versions new to their ids' rows and first_conflicts the
 * ids whose row is new (their first conflict).
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

function buildStatement(quotedSchema: string): string {
  const s = quotedSchema;
  const ctes = [
    input(),
    lease(s),
    foreignFeed(s),
    cursor(s),
    events(s),
    emailStatus(s),
    contactStatus(s),
    suppressions(s),
    outbox(s),
    quarantine(s),
    conflicts(s),
    sourceCounts(s),
  ];
  return `
WITH ${ctes.join(', ')}
${answer()}`;
}

/**
 * The batch (no record): its unique events ($3) as rows, each with the mailboxes it
 * names (keys: the applier folds them, mailboxes.ts), its queue and job name ($4) and
 * its place in the batch, for the parts below to read.
 */
function input(): string {
  return `input AS (
  SELECT t.id, t.type, t.created_at, t.data, t.keys,
    $4::jsonb -> t.type ->> 0 AS queue, $4::jsonb -> t.type ->> 1 AS job_name, t.ord
  FROM ROWS FROM (jsonb_to_recordset($3::jsonb) AS (id text, type text, created_at text, data jsonb, keys jsonb))
    WITH ORDINALITY AS t(id, type, created_at, data, keys, ord)
)`;
}

/**
 * leases, share-locked, never written: the batch commits only while the writer holds
 * the source.
 *
 *   lease the writer's lease row, when it names a fencing token: FOR KEY SHARE, so that
 *         a worker taking the source over (FOR UPDATE SKIP LOCKED, lease.ts) skips it
 *         until this commit ends, while the holder's own renewal (an UPDATE of no key
 *         column) does not wait behind it
 *   held  true when no token is named, or the lease still has the writer's token
 */
function lease(s: string): string {
  return `lease AS (
  SELECT FROM ${s}.leases WHERE $11::bigint IS NOT NULL AND source = $1::text AND token = $11::bigint
  FOR KEY SHARE
), held AS (
  SELECT $11::bigint IS NULL OR EXISTS (SELECT FROM lease) AS ok
)`;
}

/**
 * events, only read: a page mostly of conflicts is another account's feed, and its
 * batch stores nothing.
 *
 *   clash per page of a feed batch ($12), its events stored before with other content
 *   alien the first page where they are at least FOREIGN_FEED_MIN and more than half of
 *         the page: another account's feed (foreign-feed.ts), which stores nothing
 */
function foreignFeed(s: string): string {
  return `clash AS (
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
)`;
}

/**
 * cursors: compare-and-set, so that the position moves only from where this writer read
 * it and a writer left behind by another stores nothing; go gates every write below.
 *
 *   cur   compare-and-set of the cursor (feed batches only), gated on held and no alien page;
 *         locks the cursor row
 *   go    held, no alien page, and no cursor to move or the compare-and-set hit its row
 */
function cursor(s: string): string {
  return `cur AS (
  UPDATE ${s}.cursors SET after_id = $7::text, check_before = $13::text, check_digest = $14::text,
    updated_at = now()
  WHERE $5::boolean AND (SELECT ok FROM held) AND NOT EXISTS (SELECT FROM alien)
    AND source = $1::text AND after_id IS NOT DISTINCT FROM $6::text
  RETURNING 1
), go AS (
  SELECT (SELECT ok FROM held) AND NOT EXISTS (SELECT FROM alien)
    AND (NOT $5::boolean OR EXISTS (SELECT FROM cur)) AS ok
)`;
}

/**
 * events: each event is stored once, whatever the repeats; the new ones feed every
 * projection and the outbox.
 *
 *   ins   events, ON CONFLICT DO NOTHING, gated on go; RETURNING the new ones
 */
function events(s: string): string {
  return `ins AS (
  INSERT INTO ${s}.events AS ev (source, id, type, created_at, data, received_via)
  SELECT $1::text, id, type, created_at::timestamptz, data, $2::text FROM input
  WHERE (SELECT ok FROM go)
  ORDER BY ord
  ON CONFLICT (source, id) DO NOTHING
  RETURNING ev.id, ev.type, ev.created_at, ev.data
)`;
}

/**
 * outbox: a job for each new routed event, committed with it, for the relay to hand
 * to its queue.
 *
 *   ob    outbox rows for the new routed events, in feed order (no copy of the event)
 */
function outbox(s: string): string {
  return `ob AS (
  -- No payload: the job's data is the event, read back from events only when a crash
  -- left the row behind (the worker publishes what it just committed from memory).
  INSERT INTO ${s}.outbox (source, event_id, queue, job_name)
  SELECT $1::text, i.id, i.queue, i.job_name
  FROM ins n JOIN input i ON i.id = n.id
  WHERE i.queue IS NOT NULL
  -- seq is drawn in this order, so the relay publishes in feed order.
  ORDER BY i.ord
  RETURNING seq, event_id
)`;
}

/**
 * quarantine: what cannot be stored as events ($8, $9: items that failed the envelope
 * checks, events Postgres refuses), kept raw, once each, so that nothing is dropped
 * silently.
 *
 *   q     quarantine rows, gated on go
 */
function quarantine(s: string): string {
  return `q AS (
  INSERT INTO ${s}.quarantine (source, raw, raw_sha256, reason)
  SELECT $1::text, raw, encode(sha256(convert_to(raw, 'UTF8')), 'hex'), reason
  FROM unnest($8::text[], $9::text[]) AS r(raw, reason)
  WHERE (SELECT ok FROM go)
  ON CONFLICT (source, raw_sha256) DO NOTHING
  RETURNING 1
)`;
}

/**
 * conflicts: the ids served again with other content than the version kept, which
 * the events table cannot show (it keeps the first).
 *
 *   seen  the batch's events (and repeats within it) whose id was stored before
 *   other those of them whose content differs from the version kept
 *   newest per id, the batch's last other version, and how many versions are new to
 *         the id's conflicts row (not the one it holds: a retried delivery)
 *   conf  conflicts: one row per id, holding the newest other version and counting
 *         every version recorded (versions_seen), so an id served again and again
 *         with other content costs one row
 */
function conflicts(s: string): string {
  // One version of an event as text, the same whatever the session's time zone.
  const version = (t: string, createdAt: string) =>
    `jsonb_build_object('id', ${t}.id, 'type', ${t}.type, 'created_at', ` +
    `to_char(${createdAt} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), 'data', ${t}.data)::text`;
  const sha = (text: string) => `encode(sha256(convert_to(${text}, 'UTF8')), 'hex')`;
  return `seen AS MATERIALIZED (
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
)`;
}

/**
 * source_counts: the source's events stored and the newest one's date, kept as batches
 * commit so that `status` and the metrics read one row instead of counting events.
 *
 *   counted  the source's row of source_counts: events stored, the newest one's date
 *         (read by `status` and the metrics); written last, so its row lock is the
 *         last one taken, held only until the commit
 */
function sourceCounts(s: string): string {
  return `counted AS (
  INSERT INTO ${s}.source_counts AS c (source, events_stored, newest_event_at)
  SELECT $1::text, count(*), max(created_at) FILTER (WHERE created_at <= now()) FROM ins
  HAVING count(*) > 0
  ON CONFLICT (source) DO UPDATE SET events_stored = c.events_stored + excluded.events_stored,
    newest_event_at = GREATEST(c.newest_event_at, excluded.newest_event_at)
)`;
}

/** The statement's one row (ApplyRow in isolate.ts): what it did, read from the parts above. */
function answer(): string {
  return `SELECT (SELECT ok FROM go) AS ok, (SELECT ok FROM held) AS held,
  (SELECT n FROM alien)::int AS alien_conflicts, (SELECT size FROM alien)::int AS alien_events,
  ARRAY(SELECT id FROM seen WHERE first) AS stored_before,
  (SELECT count(*) FROM q)::int AS quarantined,
  (SELECT coalesce(sum(added), 0) FROM newest)::int AS conflicts,
  (SELECT count(*) FILTER (WHERE first) FROM conf)::int AS first_conflicts,
  -- JSON, not arrays: JSON.parse reads a thousand strings far faster than the driver's array parser.
  (SELECT coalesce(json_agg(seq::text ORDER BY seq), '[]') FROM ob) AS outbox_seqs,
  (SELECT coalesce(json_agg(event_id ORDER BY seq), '[]') FROM ob) AS outbox_ids,
  (SELECT count(*) FROM up)::int AS projected,
  (SELECT count(*) FROM (SELECT FROM contact GROUP BY id HAVING count(email) = 0) x)::int AS contacts_without_email`;
}
