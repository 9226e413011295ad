import type { ServiceEvent } from '../api/types.js';
import { CONFIG_DEFAULTS } from '../config/config-defaults.js';
import { carrierOf, inSpan } from '../tracing/tracing.js';
import { applyStatement } from './apply-statement.js';
import type { CursorMove } from './cursor-move.js';
import { beginWith, inTransaction, quoteSchema, type Store } from './db.js';
import type { ForeignPage } from './foreign-feed.js';
import { type ApplyRow, applyIsolated, isSplittable, type Part, type RunPart } from './isolate.js';
import { mailboxesOf } from './mailboxes.js';

/** Where the outbox sends an event type; null from the router means "store only". */
export interface EventRoute {
  queue: string;
  jobName: string;
}

/** One page (or a few) to store in one transaction. */
export interface ApplyBatch {
  source: string;
  receivedVia: 'feed' | 'webhook';
  /** Checked envelopes in feed order; the same id may appear twice (the first stands). */
  events: readonly ServiceEvent[];
  /** Items that failed the envelope checks, kept raw. */
  quarantine: readonly { raw: string; reason: string }[];
  /**
   * Compare-and-set of the cursor (feed only): `prev` must still be stored for `next` to
   * land. `check`: what the next turn compares its first page with (CursorEvent).
   */
  cursor?: CursorMove;
  /** The writer's fencing token (src/store/lease.ts): the batch commits only while the lease has it. */
  leaseToken?: string;
  /**
   * Where each page of a feed batch begins, as indices into `events`, ascending: a page
   * mostly of conflicts (foreign-feed.ts) stores nothing of the batch. Absent: no check.
   */
  pageStarts?: readonly number[];
}

export interface ApplyResult {
  /**
   * 'cursor-conflict': another worker moved the cursor first; 'lease-lost': the lease
   * has another holder's token now; 'foreign-feed': a page is mostly conflicts, another
   * account's feed (`foreign`). Either way nothing of the batch was kept.
   */
  status: 'applied' | 'cursor-conflict' | 'lease-lost' | 'foreign-feed';
  /** With 'foreign-feed': the first such page's counts. */
  foreign?: ForeignPage;
  /** The events stored by this batch, in feed order. */
  inserted: ServiceEvent[];
  /** Events already stored, or repeated within the batch. */
  duplicates: number;
  /**
   * Events of the batch that Postgres cannot store (a NUL, an index row too large,
   * a value it refuses), kept in quarantine instead, with the reason.
   */
  unstorable: { id: string; reason: string }[];
  /** Quarantine rows this batch added (a raw text already there is not counted). */
  quarantined: number;
  /**
   * Conflicts this batch recorded: versions of stored ids that came back with other
   * content (a version an id's conflicts row holds already, a retry, is not counted).
   */
  conflicts: number;
  /** Ids among them with no conflict recorded before: what is worth a warning, the rest being counted. */
  firstConflicts: number;
  /**
   * New contact.* events of this batch without a string data.email that keys an
   * address (address-key.ts): stored and enqueued, but they update no contact_status
   * or suppression.
   */
  contactsWithoutEmail: number;
  /** Outbox rows this batch added. */
  outboxRows: number;
  /** Those rows, in seq order, with their events: what the relay publishes once the batch has committed. */
  outbox: OutboxEntry[];
}

/** An outbox row just committed, with the event it stands for (the job's data, from memory). */
export interface OutboxEntry {
  /** bigserial, as text. */
  seq: string;
  source: string;
  queue: string;
  jobName: string;
  event: ServiceEvent;
  /** The commit's span as trace metadata, for the job to link to; absent when not traced (or read back from the outbox). */
  trace?: string;
}

export interface Applier {
  apply(batch: ApplyBatch): Promise<ApplyResult>;
}

export interface ApplierOptions {
  /**
   * Bounds the slow path's transaction (the only one that holds a source's rows across
   * round trips) below the lease, so that a writer frozen inside it cannot hold the
   * rows past its lease: SOURCE_LEASE_MS, in ms. Default: CONFIG_DEFAULTS.SOURCE_LEASE_MS,
   * the lease's own default (serve-webhooks takes no lease and passes none).
   */
  leaseMs?: number;
}

/**
 * The page applier. Each batch is one statement (see apply-statement.ts): events,
 * the email_status, contact_status and suppressions projections, outbox rows, quarantine, conflicts and the cursor
 * move commit together or not at all. The cursor row must exist (ensureCursor)
 * for a compare-and-set to succeed. An event Postgres can never store is that
 * event's problem, not its batch's: when the statement fails so, the batch is
 * applied again in parts (isolate.ts) and the refused events are quarantined. A
 * batch that hits statement_timeout (which Postgres enforces on every statement, the
 * one-statement path included) is applied again in parts the same way, and a single
 * event that cannot be stored within it is quarantined.
 */
export function createApplier(
  store: Store,
  route: (type: string) => EventRoute | null,
  opts: ApplierOptions = {},
): Applier {
  // Sent unnamed: a named prepared statement lives in one server session, which a
  // transaction pooler does not keep (docs/SCALING.md, Through a transaction pooler).
  const text = applyStatement(quoteSchema(store.schema));
  const begin = boundedBegin(store.serverTimeoutMs, opts.leaseMs ?? CONFIG_DEFAULTS.SOURCE_LEASE_MS);

  return traced({
    async apply(batch) {
      const { part, json, unstorable } = prepare(batch);
      if (batch.cursor === undefined && part.events.length === 0 && part.raws.length === 0) {
        return { ...nothingApplied(), duplicates: batch.events.length };
      }
      const pageOrds = batch.pageStarts ? pageOrdinals(batch.events, batch.pageStarts, part.events) : [];
      const run = statementRunner(text, batch, route, { part, json, pageOrds });
      let unique = part.events;
      let row: ApplyRow;
      try {
        // In a transaction of its own only for its server-side deadline: a statement the
        // client gave up on is cancelled and rolled back by Postgres, never committed later.
        row = await inTransaction(store, (client) => run(client, part));
      } catch (err) {
        if (!isSplittable(err)) throw err;
        const isolated = await applyIsolated(store.pool, run, part, begin);
        row = isolated.row;
        const refused = new Set(isolated.refused.map((r) => r.event));
        unique = unique.filter((e) => !refused.has(e));
        for (const r of isolated.refused) unstorable.push({ id: r.event.id, reason: r.reason });
      }
      return resultOf(batch, row, unique, unstorable, route);
    },
  });
}

/** The router createApplier is given: null means "store only". */
type Router = (type: string) => EventRoute | null;

/** A batch made ready for the statement: what it stores, and the whole's JSON, made once. */
interface Prepared {
  part: Part & { events: ServiceEvent[] };
  json: string;
  /** The events left out of `part` because Postgres cannot store them; the slow path adds its own. */
  unstorable: ApplyResult['unstorable'];
}

/** The batch's first version of each id apart from its repeats, and what goes to quarantine. */
function prepare(batch: ApplyBatch): Prepared {
  let unique: ServiceEvent[] = [];
  let repeats: ServiceEvent[] = [];
  const seen = new Set<string>();
  for (const event of batch.events) {
    if (seen.has(event.id)) repeats.push(event);
    else unique.push(event);
    seen.add(event.id);
  }
  const raws: string[] = [];
  const reasons: string[] = [];
  const unstorable: ApplyResult['unstorable'] = [];
  // jsonb cannot hold U+0000 or a lone surrogate, both of which JSON escapes: only a
  // batch whose JSON holds such an escape pays for a look at each event, and the
  // culprits go to quarantine.
  let json = eventsJson(unique);
  if (SUSPECT_ESCAPE.test(json) || (repeats.length > 0 && SUSPECT_ESCAPE.test(eventsJson(repeats)))) {
    const keep = (event: ServiceEvent): boolean => {
      const problem = unstorableText(event, JSON.stringify(event.data));
      if (problem) {
        raws.push(JSON.stringify(event));
        reasons.push(problem);
        unstorable.push({ id: event.id, reason: problem });
      }
      return !problem;
    };
    unique = unique.filter(keep);
    repeats = repeats.filter(keep);
    json = eventsJson(unique);
  }
  for (const item of batch.quarantine) {
    raws.push(withoutNul(item.raw));
    reasons.push(withoutNul(item.reason));
  }
  return { part: { events: unique, repeats, cursor: batch.cursor, raws, reasons }, json, unstorable };
}

/** Runs the statement for the whole batch (`whole`) or, on the slow path, for one part of it. */
function statementRunner(
  text: string,
  batch: ApplyBatch,
  route: Router,
  whole: { part: Part; json: string; pageOrds: number[] },
): RunPart {
  return async (db, p) => {
    const values = [
      batch.source,
      batch.receivedVia,
      // The whole batch's JSON is made once; only the slow path's parts make their own.
      p.events === whole.part.events ? whole.json : eventsJson(p.events),
      JSON.stringify(routesOf(p.events, route)),
      p.cursor !== undefined,
      p.cursor?.prev ?? null,
      p.cursor?.next ?? null,
      p.raws,
      p.reasons,
      eventsJson(p.repeats),
      batch.leaseToken ?? null,
      // The slow path's parts are checked no more: the whole batch was, unless Postgres refused it first.
      p.events === whole.part.events ? whole.pageOrds : [],
      p.cursor?.check?.before ?? null,
      p.cursor?.check?.digest ?? null,
    ];
    const { rows } = await db.query<ApplyRow>(text, values);
    return rows[0]!;
  };
}

/** What the statement's row says of the batch; `unique` are the events it was given, less any refused. */
function resultOf(
  batch: ApplyBatch,
  row: ApplyRow,
  unique: ServiceEvent[],
  unstorable: ApplyResult['unstorable'],
  route: Router,
): ApplyResult {
  if (!row.held) return { ...nothingApplied(), status: 'lease-lost' };
  if (row.alien_conflicts !== null && row.alien_events !== null) {
    const foreign = { conflicts: row.alien_conflicts, events: row.alien_events };
    return { ...nothingApplied(), status: 'foreign-feed', foreign };
  }
  if (!row.ok) return { ...nothingApplied(), status: 'cursor-conflict' };
  const before = new Set(row.stored_before);
  const inserted = before.size === 0 ? unique : unique.filter((e) => !before.has(e.id));
  return {
    status: 'applied',
    inserted,
    duplicates: batch.events.length - unstorable.length - inserted.length,
    unstorable,
    quarantined: row.quarantined,
    conflicts: row.conflicts,
    firstConflicts: row.first_conflicts,
    contactsWithoutEmail: row.contacts_without_email,
    outboxRows: row.outbox_seqs.length,
    outbox: outboxEntries(batch.source, row, inserted, route),
  };
}

/** The statement's new outbox rows joined with the events they stand for. */
function outboxEntries(
  source: string,
  row: ApplyRow,
  inserted: readonly ServiceEvent[],
  route: Router,
): OutboxEntry[] {
  if (row.outbox_seqs.length === 0) return [];
  const byId = new Map(inserted.map((e) => [e.id, e]));
  return row.outbox_seqs.map((seq, i) => {
    const event = byId.get(row.outbox_ids[i]!)!;
    const { queue, jobName } = route(event.type)!;
    return { seq, source, queue, jobName, event };
  });
}

/** Event type to [queue, job name], for the types of these events that have a queue. */
function routesOf(events: readonly ServiceEvent[], route: Router): Record<string, [string, string]> {
  const routes: Record<string, [string, string]> = {};
  const routed = new Set<string>();
  for (const { type } of events) {
    if (routed.has(type)) continue;
    routed.add(type);
    const r = route(type);
    if (r) routes[type] = [r.queue, r.jobName];
  }
  return routes;
}

/**
 * Each batch in a `commit` span: what it stored, and its context on every outbox entry,
 * so that the job of each event it stored links back to it.
 */
function traced(applier: Applier): Applier {
  return {
    apply: (batch) =>
      inSpan(
        'commit',
        {
          'feedsync.source': batch.source,
          'feedsync.received_via': batch.receivedVia,
          'feedsync.batch.events': batch.events.length,
        },
        async (span) => {
          const result = await applier.apply(batch);
          span.setAttributes({
            'feedsync.commit.status': result.status,
            'feedsync.events.new': result.inserted.length,
            'feedsync.events.duplicate': result.duplicates,
            'feedsync.events.quarantined': result.quarantined,
            'feedsync.outbox.rows': result.outboxRows,
          });
          const trace = carrierOf(span);
          if (trace !== undefined) for (const entry of result.outbox) entry.trace = trace;
          return result;
        },
      ),
  };
}

/**
 * The slow path's BEGIN: a statement and an idle pause inside it each end well before
 * the lease would (a third of it) and a statement within the store's own deadline, so a
 * writer frozen or cut off mid-transaction releases the source's rows in time for the
 * next holder. A wait on a row lock ends sooner, with its own SQLSTATE (55P03): an event
 * held up by another writer is not one too slow to store (isolate.ts quarantines those).
 */
function boundedBegin(serverTimeoutMs: number, leaseMs: number): string {
  const idle = Math.max(1000, Math.floor(leaseMs / 3));
  const statement = Math.min(idle, serverTimeoutMs);
  return beginWith({
    statement_timeout: statement,
    idle_in_transaction_session_timeout: idle,
    lock_timeout: Math.max(1, Math.floor(statement / 2)),
  });
}

/** What a batch that stored nothing reports (a fresh object: callers may keep it). */
export function nothingApplied(): ApplyResult {
  return {
    status: 'applied',
    inserted: [],
    duplicates: 0,
    unstorable: [],
    quarantined: 0,
    conflicts: 0,
    firstConflicts: 0,
    contactsWithoutEmail: 0,
    outboxRows: 0,
    outbox: [],
  };
}

/**
 * Where each page begins among the events the statement gets (`unique`, a subsequence of
 * `events`): 1-based ordinals, ascending, a page that brings none of them left out.
 */
function pageOrdinals(
  events: readonly ServiceEvent[],
  starts: readonly number[],
  unique: readonly ServiceEvent[],
): number[] {
  const pageOf = new Map<ServiceEvent, number>();
  let page = -1;
  events.forEach((event, i) => {
    while (page + 1 < starts.length && starts[page + 1]! <= i) page++;
    pageOf.set(event, page);
  });
  const ords: number[] = [];
  let last: number | undefined;
  unique.forEach((event, k) => {
    const p = pageOf.get(event);
    if (p !== last) ords.push(k + 1);
    last = p;
  });
  return ords;
}

/**
 * The events as the statement reads them: the four envelope fields, whatever else a page
 * carried, and for the events that key contact_status or suppressions the mailboxes they
 * name (mailboxes.ts: folded here, as `send` folds what it looks up).
 */
export function eventsJson(events: readonly ServiceEvent[]): string {
  return JSON.stringify(
    events.map((e) => {
      const keyed = KEYED_BY.get(e.type);
      const envelope = { id: e.id, type: e.type, created_at: e.created_at, data: e.data };
      return keyed === undefined ? envelope : { ...envelope, keys: mailboxesOf(keyed(e.data)) };
    }),
  );
}

/**
 * What of `data` each type keys its records by: a contact's `email` (a string), the
 * recipients in `to` of a bounce or a complaint (a string or an array of them).
 */
const KEYED_BY: ReadonlyMap<string, (data: Record<string, unknown>) => unknown> = new Map([
  ['contact.subscribed', contactEmail],
  ['contact.unsubscribed', contactEmail],
  ['email.bounced', recipients],
  ['email.complained', recipients],
]);

function contactEmail(data: Record<string, unknown>): unknown {
  return typeof data.email === 'string' ? data.email : null;
}

function recipients(data: Record<string, unknown>): unknown {
  return data.to;
}

/** The JSON escapes of U+0000 and of a UTF-16 surrogate; JSON.stringify escapes only lone ones. */
const SUSPECT_ESCAPE = /\\u0000|\\ud[89a-f]/i;
// An escaped backslash before "u…" is text, not an escape: count the backslashes.
const NUL_ESCAPE = /(?<!\\)(?:\\\\)*\\u0000/;
const LONE_SURROGATE_ESCAPE = /(?<!\\)(?:\\\\)*\\ud[89a-f][0-9a-f]{2}/i;

/** Postgres text and jsonb cannot hold U+0000, nor jsonb a lone surrogate; such an event goes to quarantine. */
export function unstorableText(event: ServiceEvent, dataJson: string): string | null {
  if (event.id.includes('\u0000') || event.type.includes('\u0000') || event.created_at.includes('\u0000')) {
    return 'a NUL character in id, type or created_at, which Postgres cannot store';
  }
  if (NUL_ESCAPE.test(dataJson)) return 'a NUL character in data, which Postgres jsonb cannot store';
  const envelope = JSON.stringify([event.id, event.type, event.created_at]);
  if (LONE_SURROGATE_ESCAPE.test(envelope) || LONE_SURROGATE_ESCAPE.test(dataJson)) {
    return 'a lone UTF-16 surrogate, which Postgres jsonb cannot store';
  }
  return null;
}

function withoutNul(text: string): string {
  return text.includes('\u0000') ? text.replaceAll('\u0000', '\\u0000') : text;
}
