import { createHmac } from 'node:crypto';
import {
  anyMatches,
  DEFAULT_TOLERANCE_SEC,
  type HeaderRefusal,
  type SignatureCheck,
  type VerifyOptions,
} from './signature.js';

/**
 * Standard Webhooks (the signing Resend and every sender through Svix use): three
 * headers, `webhook-id`, `webhook-timestamp` and `webhook-signature`, or the same
 * named `svix-*`; the signature is `v1,<base64 HMAC-SHA256>` over `${id}.${timestamp}.`
 * and the body's raw bytes, several space-separated during a key rotation; the secret is
 * `whsec_<base64 key>`.
 */

/** The three headers of a delivery, as a request has them (lower-case names). */
export type StandardHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

const FIELDS = ['id', 'timestamp', 'signature'] as const;
/** The prefix of a Standard Webhooks secret; the base64 key follows it. */
const SECRET_PREFIX = 'whsec_';
/** A message id: printable ASCII without spaces, 256 characters at most (Svix's are `msg_…`). */
const MESSAGE_ID = /^[\x21-\x7e]{1,256}$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * The HMAC key of a secret: the base64 after `whsec_` (the prefix may be left off, as the
 * reference library allows). Null when the text is no base64 key, so a misconfigured
 * secret is refused at start, never a delivery later.
 */
export function standardSecretKey(secret: string): Buffer | null {
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  if (encoded.length === 0 || !BASE64.test(encoded)) return null;
  return Buffer.from(encoded, 'base64');
}

/**
 * One header's value, of the `webhook-*` family when the request has any of it, else of
 * `svix-*` (the three are never mixed); a repeated header is null, malformed.
 */
function header(headers: StandardHeaders, name: 'id' | 'timestamp' | 'signature'): string | undefined | null {
  const standard = FIELDS.some((field) => headers[`webhook-${field}`] !== undefined);
  const value = headers[`${standard ? 'webhook' : 'svix'}-${name}`];
  if (value === undefined) return undefined;
  return typeof value === 'string' ? value : null;
}

function hmacBase64(key: Buffer, id: string, t: string, rawBody: Buffer | string): string {
  return createHmac('sha256', key)
    .update(`${id}.${t}.`)
    .update(typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody)
    .digest('base64');
}

/** The `webhook-signature` value for a body: `v1,<base64>`. Throws on a secret that is no key. */
export function signStandardWebhook(
  rawBody: Buffer | string,
  secret: string,
  id: string,
  t: number = Math.floor(Date.now() / 1000),
): string {
  const key = standardSecretKey(secret);
  if (key === null) throw new Error('the secret is not a whsec_<base64> key');
  return `v1,${hmacBase64(key, id, String(t), rawBody)}`;
}

/** A delivery's id, timestamp and `v1` signatures, or why its headers can never verify. */
function readStandardHeaders(
  headers: StandardHeaders,
  opts: VerifyOptions,
): { id: string; t: string; candidates: string[] } | HeaderRefusal {
  const id = header(headers, 'id');
  const t = header(headers, 'timestamp');
  const signature = header(headers, 'signature');
  if (id === undefined && t === undefined && signature === undefined) return 'missing';
  if (!id || !t || !signature || !MESSAGE_ID.test(id) || !/^\d{1,15}$/.test(t)) return 'malformed';
  const candidates: string[] = [];
  for (const entry of signature.split(' ')) {
    // Other versions (v1a, asymmetric keys) are skipped, as the reference library does.
    if (entry.startsWith('v1,') && entry.length > 3) candidates.push(entry.slice(3));
  }
  if (candidates.length === 0) return 'malformed';
  const now = opts.now ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - Number(t)) > (opts.toleranceSec ?? DEFAULT_TOLERANCE_SEC)) return 'stale';
  return { id, t, candidates };
}

/** Null when the headers may verify, else why they never will: their body need not be read. */
export function standardHeaderRefusal(
  headers: StandardHeaders,
  opts: VerifyOptions = {},
): HeaderRefusal | null {
  const read = readStandardHeaders(headers, opts);
  return typeof read === 'string' ? read : null;
}

/**
 * Checks the headers against every key (a rotation has several): `missing` without any
 * of the three headers, `malformed` without all three or without a `v1,` signature,
 * `stale` when the timestamp is more than the tolerance away from now either way,
 * `mismatch` when no signature matches any key. Constant time; never throws.
 */
export function checkStandardSignature(
  rawBody: Buffer | string,
  headers: StandardHeaders,
  keys: readonly Buffer[],
  opts: VerifyOptions = {},
): SignatureCheck {
  const read = readStandardHeaders(headers, opts);
  if (typeof read === 'string') return read;
  const expected = keys.map((key) => hmacBase64(key, read.id, read.t, rawBody));
  return anyMatches(expected, read.candidates) ? 'valid' : 'mismatch';
}

/**
 * True when the headers (`webhook-*` or `svix-*`, lower-case names) carry a valid
 * Standard Webhooks signature of these exact bytes under `secret` (`whsec_<base64>`).
 * Anything malformed, the secret included, is `false`, never an exception.
 */
export function verifyStandardWebhook(
  rawBody: Buffer | string,
  headers: StandardHeaders,
  secret: string,
  opts: VerifyOptions = {},
): boolean {
  const key = typeof secret === 'string' ? standardSecretKey(secret) : null;
  if (key === null) return false;
  return checkStandardSignature(rawBody, headers, [key], opts) === 'valid';
}

/** The delivery's own id (`webhook-id` or `svix-id`): the event's id when its body has none. */
export function standardMessageId(headers: StandardHeaders): string | undefined {
  const id = header(headers, 'id');
  return id && MESSAGE_ID.test(id) ? id : undefined;
}
