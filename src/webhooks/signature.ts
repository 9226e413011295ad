import { createHmac, timingSafeEqual } from 'node:crypto';

/** The header the service signs its webhook deliveries with. */
export const SIGNATURE_HEADER = 'service-signature';
/** Default tolerance, both ways, between the signature's `t` and now. */
export const DEFAULT_TOLERANCE_SEC = 300;

export interface VerifyOptions {
  /** Seconds `t` may differ from now, in either direction. Default 300. */
  toleranceSec?: number;
  /** Now, in unix seconds. Default the system clock. */
  now?: number;
}

function hmacHex(rawBody: Buffer | string, secret: string, t: number | string): string {
  return createHmac('sha256', Buffer.from(secret, 'utf8'))
    .update(`${t}.`)
    .update(typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody)
    .digest('hex');
}

/** The `Service-Signature` header value for a body: `t=<unix seconds>,v1=<hex HMAC-SHA256>`. */
export function signWebhookPayload(
  rawBody: Buffer | string,
  secret: string,
  t: number = Math.floor(Date.now() / 1000),
): string {
  return `t=${t},v1=${hmacHex(rawBody, secret, t)}`;
}

/** Why a delivery's signature was refused, or `valid`. Never names a secret or the header's value. */
export type SignatureCheck = 'valid' | 'missing' | 'malformed' | 'stale' | 'mismatch';

/** Why a header can never verify, whatever the body: no header, no whole-number `t` or `v1`, or a `t` out of the window. */
export type HeaderRefusal = Exclude<SignatureCheck, 'valid' | 'mismatch'>;

/** A header's `t` and `v1` values, or why it can never verify. */
function readHeader(
  header: string | undefined,
  opts: VerifyOptions,
): { t: string; candidates: string[] } | HeaderRefusal {
  if (typeof header !== 'string') return 'missing';
  let t: string | undefined;
  const candidates: string[] = [];
  for (const entry of header.split(',')) {
    const eq = entry.indexOf('=');
    if (eq < 0) continue;
    const key = entry.slice(0, eq).trim();
    const value = entry.slice(eq + 1).trim();
    if (key === 't') t = value;
    else if (key === 'v1') candidates.push(value);
  }
  if (t === undefined || !/^\d{1,15}$/.test(t) || candidates.length === 0) return 'malformed';

  const now = opts.now ?? Math.floor(Date.now() / 1000);
  const tolerance = opts.toleranceSec ?? DEFAULT_TOLERANCE_SEC;
  if (Math.abs(now - Number(t)) > tolerance) return 'stale';
  return { t, candidates };
}

/**
 * What can be told of a signature before its body is read: null when the header may
 * verify, else why it never will. The receiver reads no body for such a request.
 */
export function headerRefusal(header: string | undefined, opts: VerifyOptions = {}): HeaderRefusal | null {
  const read = readHeader(header, opts);
  return typeof read === 'string' ? read : null;
}

/**
 * Checks the header against every secret (a rotation has several): `missing` without
 * a header, `malformed` without a whole-number `t` or any `v1`, `stale` when `t` is
 * more than the tolerance away from now, `mismatch` when no `v1` matches any secret.
 * Compared in constant time; a malformed header is an answer, never an exception.
 */
export function checkWebhookSignature(
  rawBody: Buffer | string,
  header: string | undefined,
  secrets: readonly string[],
  opts: VerifyOptions = {},
): SignatureCheck {
  const read = readHeader(header, opts);
  if (typeof read === 'string') return read;
  const { t, candidates } = read;

  const expected = secrets
    .filter((secret) => typeof secret === 'string' && secret.length > 0)
    .map((secret) => hmacHex(rawBody, secret, t));
  return anyMatches(expected, candidates) ? 'valid' : 'mismatch';
}

/**
 * Whether any candidate equals any expected signature. Every pair is compared, in
 * constant time and without an early exit, so timing reveals nothing of which matched.
 */
export function anyMatches(expected: readonly string[], candidates: readonly string[]): boolean {
  let valid = false;
  for (const want of expected) {
    const wanted = Buffer.from(want, 'utf8');
    for (const candidate of candidates) {
      const given = Buffer.from(candidate, 'utf8');
      if (given.length === wanted.length && timingSafeEqual(given, wanted)) valid = true;
    }
  }
  return valid;
}

/**
 * True when the header carries a valid signature of these exact bytes. Any
 * malformed header is `false`, never an exception. Several `v1` entries are
 * accepted (secret rotation): one match is enough. Compared in constant time.
 */
export function verifyWebhookSignature(
  rawBody: Buffer | string,
  header: string,
  secret: string,
  opts: VerifyOptions = {},
): boolean {
  if (typeof secret !== 'string' || secret.length === 0) return false;
  return checkWebhookSignature(rawBody, header, [secret], opts) === 'valid';
}
