import { hasMarkedBytes, NOT_UTF8, quarantineForm } from './utf8.js';

/**
 * Finds the items of a page that cannot be stored as JSON.parse made them, each with
 * its raw text, to be quarantined as it came:
 *
 * - an item whose numbers JSON.parse cannot keep: an integer past double precision
 *   (12345678901234567891 becomes 12345678901234567000), a number out of range (1e400
 *   becomes Infinity, then null) or one with more digits than a double holds;
 * - an item holding bytes that are not UTF-8 (marked by utf8.ts's decodeUtf8): its
 *   ids and addresses cannot be read as the service meant them, and must never be
 *   stored altered.
 *
 * Node 20's JSON.parse gives a reviver no source text, so this reads the text once
 * more, without recursion, and only when it may hold such a number or bytes at all.
 */

/** Why an item whose numbers JSON.parse changed is quarantined rather than stored altered. */
export const INEXACT_REASON = 'a number in it cannot be kept exactly (beyond double precision or range)';

/** Why an item holding bytes that are not UTF-8 is quarantined (its raw text in utf8.ts's quarantineForm). */
export const NOT_UTF8_REASON = `bytes in it are ${NOT_UTF8}`;

/** An item to quarantine: its raw text and why. */
export interface RawItem {
  raw: string;
  reason: string;
}

/** Numbers of at most 15 digits and no exponent always survive a double: only longer ones, or an exponent, are read. */
const MAYBE_INEXACT = /\d[eE]|(?:\d\.?){16}/;
const NUMBER = /-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const LITERAL = /true|false|null/y;

interface Frame {
  array: boolean;
  /** An object's current key (read at the top level only), an array's current index. */
  key: string | null;
  index: number;
  expectKey: boolean;
}

/**
 * The items of the body's top-level lists (`{"data": [item, …]}`) that hold a number
 * JSON.parse changed or bytes that were not UTF-8, each with its raw text and reason.
 * `text` is the JSON `body` was parsed from; `marked`, whether decodeUtf8 marked bytes in it.
 */
export function rawItems(text: string, body: unknown, marked = false): Map<object, RawItem> {
  const found = new Map<object, RawItem>();
  if (typeof body !== 'object' || body === null || !(marked || MAYBE_INEXACT.test(text))) return found;
  const frames: Frame[] = [];
  let itemStart = -1;
  let itemInexact = false;
  let itemMarked = false;
  let i = 0;
  const startValue = (at: number) => {
    // A value that starts directly in a list of the top-level object is an item.
    if (frames.length === 2 && frames[0]!.key !== null && frames[1]!.array && itemStart < 0) itemStart = at;
  };
  const endItem = (end: number) => {
    if (frames.length !== 2 || itemStart < 0) return;
    const list = (body as Record<string, unknown>)[frames[0]!.key!];
    const item = Array.isArray(list) ? list[frames[1]!.index] : undefined;
    if ((itemInexact || itemMarked) && typeof item === 'object' && item !== null) {
      const raw = text.slice(itemStart, end);
      found.set(
        item,
        itemMarked ? { raw: quarantineForm(raw), reason: NOT_UTF8_REASON } : { raw, reason: INEXACT_REASON },
      );
    }
    itemStart = -1;
    itemInexact = false;
    itemMarked = false;
  };
  while (i < text.length) {
    const c = text[i]!;
    const top = frames[frames.length - 1];
    if (c === '{' || c === '[') {
      startValue(i);
      frames.push({ array: c === '[', key: null, index: 0, expectKey: c === '{' });
      i++;
    } else if (c === '}' || c === ']') {
      frames.pop();
      i++;
      endItem(i);
    } else if (c === ',') {
      if (top?.array) top.index++;
      else if (top) top.expectKey = true;
      i++;
    } else if (c === '"') {
      const end = stringEnd(text, i);
      if (marked && itemStart >= 0 && hasMarkedBytes(text.slice(i, end))) itemMarked = true;
      if (top && !top.array && top.expectKey) {
        if (frames.length === 1) top.key = JSON.parse(text.slice(i, end)) as string;
        top.expectKey = false;
      } else {
        startValue(i);
        endItem(end);
      }
      i = end;
    } else if (c === '-' || (c >= '0' && c <= '9')) {
      NUMBER.lastIndex = i;
      NUMBER.test(text);
      startValue(i);
      if (frames.length > 2 && !isExact(text.slice(i, NUMBER.lastIndex))) itemInexact = true;
      i = NUMBER.lastIndex;
      endItem(i);
    } else if (c === 't' || c === 'f' || c === 'n') {
      LITERAL.lastIndex = i;
      LITERAL.test(text);
      startValue(i);
      i = LITERAL.lastIndex;
      endItem(i);
    } else {
      i++; // white space and ':'
    }
  }
  return found;
}

/** The index just past the string that opens at `start`. */
function stringEnd(text: string, start: number): number {
  let i = start + 1;
  for (;;) {
    const quote = text.indexOf('"', i);
    if (quote < 0) return text.length;
    let backslashes = 0;
    while (text[quote - 1 - backslashes] === '\\') backslashes++;
    if (backslashes % 2 === 0) return quote + 1;
    i = quote + 1;
  }
}

/** Whether a JSON number token means the same decimal as the double JSON.parse makes of it. */
function isExact(token: string): boolean {
  const n = Number(token);
  return Number.isFinite(n) && decimalOf(token) === decimalOf(String(n));
}

/** A number's text in one form: sign, significant digits without trailing zeros, exponent. */
function decimalOf(token: string): string {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(token);
  if (!m) return token;
  const fraction = m[3] ?? '';
  const digits = `${m[2]}${fraction}`.replace(/^0+/, '');
  if (digits === '') return '0';
  const significant = digits.replace(/0+$/, '');
  const exponent = Number(m[4] ?? 0) - fraction.length + (digits.length - significant.length);
  return `${m[1]}${significant}e${exponent}`;
}
