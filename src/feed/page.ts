import type { RawItem } from '../api/raw-items.js';
import type { ServiceEvent } from '../api/types.js';
import { PageError } from '../errors.js';
import { MAX_ID_LENGTH, readEnvelope } from './envelope.js';
import { jsonText } from './json-text.js';

/** One feed page after the checks of DESIGN section 1 and 4. */
export interface FeedPage {
  /** Valid events inside the type filter, in feed order. */
  events: ServiceEvent[];
  /** Items that cannot be stored as events, kept raw. */
  quarantine: { raw: string; reason: string }[];
  /** Valid events dropped because their type is outside FEED_TYPES. */
  filteredOut: number;
  /** Items on the page, of any kind. */
  size: number;
  /** The `after` to send for the next page. */
  nextAfter: string | null;
  /** True when this page is the end of the feed for now. */
  last: boolean;
}

export interface PageRules {
  /** The `after` that was sent for this page. */
  after: string | null;
  limit: number;
  /** FEED_LIST_FIELD, or null for auto. */
  listField: string | null;
  /** FEED_TYPES, or null for every type. */
  types: readonly string[] | null;
}

/**
 * Checks a parsed `/events` body and splits it into events to store, items to
 * quarantine and the next cursor. A page that breaks the rules throws PageError,
 * so the cursor never passes it. `rawItems` holds the items that cannot be stored
 * as parsed (a number the parse changed, bytes that are not UTF-8), with their raw
 * text and why: they are quarantined as they came.
 */
export function parsePage(
  body: unknown,
  rules: PageRules,
  rawItems: ReadonlyMap<object, RawItem> = new Map(),
): FeedPage {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new PageError('the events page is not a JSON object', 'NO_LIST');
  }
  const record = body as Record<string, unknown>;
  const list = findList(record, rules.listField);
  if (list.length > rules.limit) {
    throw new PageError(
      `the events page holds ${list.length} events, more than the limit ${rules.limit}`,
      'TOO_MANY',
    );
  }

  const wanted = rules.types ? new Set(rules.types) : null;
  const events: ServiceEvent[] = [];
  const quarantine: { raw: string; reason: string }[] = [];
  let filteredOut = 0;
  let lastId: string | null = null;
  for (const item of list) {
    const raw = typeof item === 'object' && item !== null ? rawItems.get(item) : undefined;
    const envelope: ReturnType<typeof readEnvelope> =
      raw === undefined ? readEnvelope(item) : { ok: false, reason: raw.reason };
    if (!envelope.ok) {
      quarantine.push({ raw: raw?.raw ?? jsonText(item), reason: envelope.reason });
      const id = (item as { id?: unknown } | null)?.id;
      if (typeof id === 'string' && canBeCursor(id)) lastId = id;
      continue;
    }
    const { event } = envelope;
    // An id Postgres cannot hold goes to quarantine in the applier; it cannot be the cursor either.
    if (canBeCursor(event.id)) lastId = event.id;
    if (wanted && !wanted.has(event.type)) filteredOut++;
    else events.push(event);
  }

  const given = record.next_after;
  if (given !== undefined && given !== null && typeof given !== 'string') {
    throw new PageError('next_after is neither a string nor null', 'BAD_NEXT_AFTER');
  }
  // The cursor is a Postgres text column, which cannot hold U+0000.
  if (typeof given === 'string' && given.includes('\u0000')) {
    throw new PageError('next_after holds a NUL character', 'BAD_NEXT_AFTER');
  }
  // Sent back as it was read: bytes that are not UTF-8 (or a lone surrogate) cannot be.
  if (typeof given === 'string' && LONE_SURROGATE.test(given)) {
    throw new PageError('next_after holds bytes that are not UTF-8 (or a lone surrogate)', 'BAD_NEXT_AFTER');
  }
  // The cursor is stored, sent in every later query string and logged: no longer than an id may be.
  if (typeof given === 'string' && given.length > MAX_ID_LENGTH) {
    throw new PageError(
      `next_after is ${given.length} characters long, more than an event id may be (${MAX_ID_LENGTH}): ${clip(given)}`,
      'BAD_NEXT_AFTER',
    );
  }
  // A missing next_after on a non-empty page means the last event's id, and the end.
  const nextAfter = typeof given === 'string' && given.length > 0 ? given : (lastId ?? rules.after);
  const last = list.length < rules.limit || typeof given !== 'string' || given === rules.after;
  return { events, quarantine, filteredOut, size: list.length, nextAfter, last };
}

/** Whether an item's id may become the cursor: one Postgres can hold, no longer than an id is kept. */
function canBeCursor(id: string): boolean {
  return id.length > 0 && id.length <= MAX_ID_LENGTH && !id.includes('\u0000') && !LONE_SURROGATE.test(id);
}

/** A UTF-16 surrogate without its pair: a byte that was not UTF-8 (api/utf8.ts), or a lone `\uDxxx` escape. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The start of a value the feed controls, quoted, for a message: never the whole of it. */
export function clip(value: string, length = 80): string {
  return JSON.stringify(value.length > length ? `${value.slice(0, length)}…` : value);
}

function findList(body: Record<string, unknown>, forced: string | null): unknown[] {
  if (forced !== null) {
    const list = body[forced];
    if (!Array.isArray(list)) {
      throw new PageError(
        `the events page has no list in "${forced}" (FEED_LIST_FIELD); keys seen: ${keysOf(body)}`,
        'NO_LIST',
      );
    }
    return list;
  }
  for (const name of ['data', 'events']) {
    const list = body[name];
    if (Array.isArray(list)) return list;
  }
  const arrays = Object.values(body).filter(Array.isArray);
  if (arrays.length === 1) return arrays[0]!;
  throw new PageError(
    `the events page has no recognisable list of events (keys seen: ${keysOf(body)}); set FEED_LIST_FIELD`,
    'NO_LIST',
  );
}

function keysOf(body: Record<string, unknown>): string {
  const keys = Object.keys(body).slice(0, 20);
  return keys.length > 0 ? keys.map((k) => JSON.stringify(k.slice(0, 40))).join(', ') : 'none';
}

/** FEED_TYPES in the feed's short form: `email.X` is sent as `X`, other types by their full name. */
export function feedTypeParam(types: readonly string[] | null): string[] | undefined {
  return types?.map((t) => (t.startsWith('email.') ? t.slice('email.'.length) : t));
}
