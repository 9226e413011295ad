import { SimError } from './errors.js';

/**
 * The keys the simulator accepts: `<prefix>_test_<x>` or `<prefix>_live_<x>`,
 * where prefix is `keyPrefix` when given, else any run of lowercase letters.
 */
export function apiKeyPattern(keyPrefix?: string): RegExp {
  const prefix = keyPrefix === undefined ? '[a-z]+' : keyPrefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^${prefix}_(test|live)_[A-Za-z0-9_-]+$`);
}

/** The key of an `Authorization: Bearer <accepted key>` header, or the 401 to answer instead. */
export function authorize(header: string | undefined, pattern: RegExp): string | SimError {
  if (!header) return unauthorized('missing_api_key', 'missing Authorization: Bearer <API key>');
  const match = /^bearer\s+(\S+)\s*$/i.exec(header);
  if (!match || !pattern.test(match[1]!)) {
    // Never echo the key: a message may end up in someone's logs.
    return unauthorized('invalid_api_key', 'the API key is not valid');
  }
  return match[1]!;
}

function unauthorized(code: 'missing_api_key' | 'invalid_api_key', message: string): SimError {
  return new SimError(401, code, message, { 'www-authenticate': 'Bearer' });
}
