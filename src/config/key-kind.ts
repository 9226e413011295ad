/**
 * The two kinds of key the service issues: `<service>_test_…` and `<service>_live_…`
 * (one account each). The kind says which account is in use without showing the key.
 */
export type KeyKind = 'test' | 'live';

/** The kind of `key`, read from its prefix; null for no key or one of neither kind. */
export function keyKindOf(key: string | null): KeyKind | null {
  const kind = key === null ? undefined : /^[a-z0-9]+_(test|live)_/.exec(key)?.[1];
  return kind === 'test' || kind === 'live' ? kind : null;
}
