/**
 * Bytes the service sends, decoded without loss. `Buffer#toString('utf8')` turns every
 * byte that is not UTF-8 into U+FFFD, so `inv-\xFF` and `inv-\xFE` would become one id
 * and an address would be stored altered. Here a body that is UTF-8 decodes as usual;
 * one that is not keeps each such byte as a lone low surrogate (U+DC80 to U+DCFF, as
 * Python's "surrogateescape" does): a mark that valid UTF-8 can never produce, so the
 * parts of the body it touches can be told apart and quarantined raw (docs/DATA.md).
 */

// ignoreBOM: a byte order mark is kept as the character it is, never dropped in silence.
const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The text of `bytes`, and whether some of them were not UTF-8 (then marked, see above). */
export function decodeUtf8(bytes: Uint8Array): { text: string; valid: boolean } {
  try {
    return { text: strict.decode(bytes), valid: true };
  } catch {
    return { text: decodeMarked(bytes), valid: false };
  }
}

/** What a quarantine row's reason says of a text in quarantineForm. */
export const NOT_UTF8 = 'not UTF-8 (kept raw: each byte that is not UTF-8 as \\xNN, a backslash as \\\\)';

/** A byte that was not UTF-8, as decodeUtf8 marks it. */
const MARK = /(?<![\uD800-\uDBFF])[\uDC80-\uDCFF]/;
const MARKS = new RegExp(MARK.source, 'g');

/** Whether `text` (from decodeUtf8) holds a byte that was not UTF-8. */
export function hasMarkedBytes(text: string): boolean {
  return MARK.test(text);
}

/**
 * `text` from decodeUtf8 in the quarantine's form of what was not UTF-8, lossless and
 * unambiguous: each byte that was not UTF-8 as `\xNN`, a NUL (which Postgres text cannot
 * hold) as `\x00`, a backslash as `\\`; everything else as it came.
 */
export function quarantineForm(text: string): string {
  return text
    .replaceAll('\\', '\\\\')
    .replaceAll('\u0000', '\\x00')
    .replace(MARKS, (c) => `\\x${(c.charCodeAt(0) - 0xdc00).toString(16).toUpperCase().padStart(2, '0')}`);
}

/** The bytes decoded as UTF-8 where they are, each other byte as its mark. */
function decodeMarked(bytes: Uint8Array): string {
  const out: string[] = [];
  let run = 0;
  let i = 0;
  while (i < bytes.length) {
    const length = sequenceLength(bytes, i);
    if (length > 0) {
      i += length;
      continue;
    }
    if (run < i) out.push(strict.decode(bytes.subarray(run, i)));
    out.push(String.fromCharCode(0xdc00 + bytes[i]!));
    i++;
    run = i;
  }
  if (run < bytes.length) out.push(strict.decode(bytes.subarray(run)));
  return out.join('');
}

/** The length of the well-formed UTF-8 sequence at `i` (Unicode's table 3-7), or 0. */
function sequenceLength(b: Uint8Array, i: number): number {
  const c = b[i]!;
  if (c < 0x80) return 1;
  const cont = (k: number, lo = 0x80, hi = 0xbf) => {
    const v = b[i + k];
    return v !== undefined && v >= lo && v <= hi;
  };
  if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
  if (c === 0xe0) return cont(1, 0xa0) && cont(2) ? 3 : 0;
  if (c === 0xed) return cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0;
  if (c >= 0xe1 && c <= 0xef) return cont(1) && cont(2) ? 3 : 0;
  if (c === 0xf0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xf1 && c <= 0xf3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c === 0xf4) return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}
