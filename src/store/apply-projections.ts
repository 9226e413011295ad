import { EMAIL_EVENT_TYPES, EMAIL_STATUS_RANK, type EmailEventType } from '../event-types.js';
import { addressKeySql, CONTACT_CLOCK_SKEW } from './address-key.js';

// The parts of the apply statement (apply-statement.ts) that keep the projections of the
// new events: email_status, contact_status and suppressions. They read only what its ins
// stored, so a batch that stores nothing (no go) projects nothing.

/**
 * email_status: each email's state from its events, the same in any order of arrival.
 *
 *   mail  the new email.* events that carry a string email_id
 *   fold  one row per email, so that one upsert per email suffices (no joins: a
 *         batch may hold thousands of events)
 *   up    email_status upsert that never moves backwards
 */
export function emailStatus(s: string): string {
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
  return `mail AS MATERIALIZED (
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
)`;
}

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

/**
 * contact_status: each address's latest subscribe or unsubscribe, which the
 * unsubscribe suppressions follow.
 *
 *   contact  the new contact.* events, one row per mailbox of data.email (keys, folded
 *         by the applier, then address_key(); one row with NULL: no key), each ranked at
 *         its created_at, or at the statement's now() when dated later
 *   latest   the latest (ranked_at, id) of each address's contact events in the batch,
 *         leaving out a subscribe dated beyond the skew, and one dated ahead of its
 *         arrival when the batch holds an unsubscribe of the address
 *   cs    contact_status upsert where that is later than the stored one, or where it is
 *         an unsubscribe and the stored state a subscribe dated ahead of its arrival;
 *         RETURNING the contacts whose state changed
 */
export function contactStatus(s: string): string {
  return `contact AS MATERIALIZED (
  SELECT n.id, n.created_at, substr(n.type, 9) AS status, k.email, LEAST(n.created_at, now()) AS ranked_at
  FROM ins n JOIN input i ON i.id = n.id
  LEFT JOIN LATERAL (
    SELECT ${addressKeySql(s, 'm')} AS email FROM jsonb_array_elements_text(i.keys) AS m
  ) k ON k.email IS NOT NULL
  WHERE n.type IN ('contact.subscribed', 'contact.unsubscribed')
), latest AS (
  SELECT DISTINCT ON (email) email, status, id, created_at, ranked_at FROM contact c
  -- A subscribe dated beyond the skew is no state: it would outrank every real unsubscribe.
  WHERE email IS NOT NULL AND NOT (status = 'subscribed' AND created_at > now() + ${CONTACT_CLOCK_SKEW})
    -- Nor is one dated ahead beside an unsubscribe of the address in the same batch: its
    -- date is no evidence that it came later, and "do not send" wins.
    AND NOT (status = 'subscribed' AND created_at > ranked_at
      AND EXISTS (SELECT FROM contact u WHERE u.email = c.email AND u.status = 'unsubscribed'))
  ORDER BY email, ranked_at DESC, id COLLATE "C" DESC
), cs AS (
  INSERT INTO ${s}.contact_status AS c (source, email, status, last_event_id, last_event_at, ranked_at)
  SELECT $1::text, email, status, id, created_at, ranked_at FROM latest
  -- Sorted, as every upsert here, so that two writers of the same addresses cannot deadlock.
  ORDER BY email
  ON CONFLICT (source, email) DO UPDATE SET status = excluded.status, last_event_id = excluded.last_event_id,
    last_event_at = excluded.last_event_at, ranked_at = GREATEST(excluded.ranked_at, c.ranked_at), updated_at = now()
  WHERE (excluded.ranked_at, excluded.last_event_id) > (c.ranked_at, c.last_event_id)
    -- A subscribe dated ahead of its arrival is known only to have happened before it
    -- arrived: an unsubscribe arriving after it is never outranked by it.
    OR (excluded.status = 'unsubscribed' AND c.status = 'subscribed' AND c.last_event_at > c.ranked_at)
  RETURNING c.email, c.status, c.last_event_id, c.last_event_at
)`;
}

/**
 * suppressions: the addresses not to send to, after a bounce, a complaint or an
 * unsubscribe.
 *
 *   hard  per recipient mailbox (keys of data.to, folded by the applier, then
 *         address_key()) and reason (bounced, complained) of the new email.bounced
 *         and email.complained events, the earliest event
 *   sup   suppressions upsert, one row per address and reason: the hard ones where
 *         earlier than the stored row, and the contacts that changed to unsubscribed
 *   lift  the unsubscribe suppressions of the contacts that changed to subscribed
 */
export function suppressions(s: string): string {
  return `hard AS MATERIALIZED (
  SELECT DISTINCT ON (address, reason) address, reason, id, created_at FROM (
    SELECT ${addressKeySql(s, 'm')} AS address, substr(n.type, 7) AS reason, n.id, n.created_at
    FROM ins n JOIN input i ON i.id = n.id CROSS JOIN LATERAL jsonb_array_elements_text(i.keys) AS m
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
  -- The addresses as one array probe the primary key, whatever the planner thinks cs
  -- holds: a join it expected one row of read every unsubscribe row of the source once
  -- per row of cs, for each batch with a contact event (a cost that grew with the store).
  DELETE FROM ${s}.suppressions s
  WHERE s.source = $1::text AND s.reason = 'unsubscribed'
    AND s.address = ANY (ARRAY(SELECT email FROM cs WHERE status = 'subscribed'))
  RETURNING 1
)`;
}

/** `CASE <column> WHEN '<value of each email type>' THEN <its rank> … END` (the types are constants of this release). */
function rankCase(column: string, valueFor: (type: EmailEventType) => string): string {
  const whens = EMAIL_EVENT_TYPES.map((t) => `WHEN '${valueFor(t)}' THEN ${EMAIL_STATUS_RANK[t]}`);
  return `(CASE ${column} ${whens.join(' ')} END)`;
}
