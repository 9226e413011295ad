import type { ServiceEvent } from '../api/types.js';
import { badRequest } from './errors.js';
import { type EventLog, positionOfId } from './event-log.js';

/** Page size when `limit` is not sent. */
export const DEFAULT_LIMIT = 100;
/** The largest `limit` accepted; above it the answer is 400 `invalid_limit`. */
export const MAX_LIMIT = 1000;
/** How many events a duplicated page repeats from the previous one. */
const DUPLICATED_EVENTS = 3;
/** How far back a duplicated page looks for events of the requested types. */
const DUPLICATE_LOOKBACK = 1000;

export interface FeedQuery {
  /** Position of `after`; 0 for the start of the feed. */
  afterPosition: number;
  /** The `after` as sent, null when absent. */
  after: string | null;
  /** Full type names to keep, or null for every type. */
  types: ReadonlySet<string> | null;
  limit: number;
}

export interface FeedPage {
  data: ServiceEvent[];
  next_after: string | null;
}

/** Parses and checks `after`, `type` and `limit`; throws a 400 naming what is wrong. */
export function parseFeedQuery(params: URLSearchParams, log: EventLog): FeedQuery {
  const after = params.get('after') || null;
  let afterPosition = 0;
  if (after !== null) {
    const position = positionOfId(after);
    if (position === null || position < 1 || position > log.size) {
      throw badRequest(
        'unknown_event_id',
        `"after" is not the id of an event in the feed: ${after.slice(0, 64)}`,
      );
    }
    afterPosition = position;
  }

  const limitParam = params.get('limit');
  let limit = DEFAULT_LIMIT;
  if (limitParam !== null && limitParam !== '') {
    if (!/^\d{1,9}$/.test(limitParam) || Number(limitParam) < 1 || Number(limitParam) > MAX_LIMIT) {
      throw badRequest('invalid_limit', `"limit" must be a whole number from 1 to ${MAX_LIMIT}`);
    }
    limit = Number(limitParam);
  }

  return { after, afterPosition, types: parseTypes(params.get('type')), limit };
}

/** `delivered,bounced` -> {email.delivered, email.bounced}; a name with a dot is taken as full. */
export function parseTypes(value: string | null): ReadonlySet<string> | null {
  if (value === null) return null;
  const tokens = value
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  if (tokens.length === 0) return null;
  const types = new Set<string>();
  for (const token of tokens) {
    if (!/^[a-z][a-z_]*(\.[a-z][a-z_]*)*$/.test(token)) {
      throw badRequest('invalid_type', `"type" holds an invalid kind: ${token.slice(0, 64)}`);
    }
    types.add(token.includes('.') ? token : `email.${token}`);
  }
  return types;
}

/**
 * One page: up to `limit` events after `after`, of the requested types.
 * `next_after` is the last id of the page, or the `after` sent when the page is
 * empty. With `duplicate`, the page first repeats the last few events up to
 * `after` (still at most `limit` events, and only when something new follows,
 * so `next_after` never moves backwards).
 */
export function readPage(log: EventLog, query: FeedQuery, duplicate = false): FeedPage {
  const { afterPosition, types, limit } = query;
  const matches = (position: number) => types === null || types.has(log.typeAt(position));

  const fresh: ServiceEvent[] = [];
  for (let p = afterPosition + 1; p <= log.size && fresh.length < limit; p++) {
    if (matches(p)) fresh.push(log.at(p));
  }

  let data = fresh;
  if (duplicate && afterPosition > 0 && fresh.length > 0) {
    const repeated: ServiceEvent[] = [];
    const want = Math.min(DUPLICATED_EVENTS, limit - 1);
    const stop = Math.max(1, afterPosition - DUPLICATE_LOOKBACK);
    for (let p = afterPosition; p >= stop && repeated.length < want; p--) {
      if (matches(p)) repeated.unshift(log.at(p));
    }
    data = [...repeated, ...fresh].slice(0, limit);
  }

  return { data, next_after: data.length > 0 ? data[data.length - 1]!.id : query.after };
}
