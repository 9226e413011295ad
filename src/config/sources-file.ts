import { ConfigError } from '../errors.js';
import { checkBaseUrl } from './base-url.js';
import { readMaxPerSecond, readRateShare, type SourceBudget } from './request-budget.js';

/** One account to sync: its cursor key, where its feed is and the key it is read with. */
export interface FeedSource {
  /** The cursor key (FEED_SOURCE for the one source without a file). */
  readonly source: string;
  /** Ends in `/api`; null only for the one source of FEED_* when FEED_BASE_URL is unset. */
  readonly baseUrl: string | null;
  /**
   * Null for the one source of FEED_* when FEED_API_KEY is unset, and for an entry whose
   * key file could not be read (see keyProblem). Never written anywhere.
   */
  readonly apiKey: string | null;
  /**
   * Why this entry has no key: its api_key_file is missing, unreadable or empty. That
   * is this source's problem alone: it fails every turn, and the others run.
   */
  readonly keyProblem: string | null;
  /** Full type names, sorted; null means every type. */
  readonly types: readonly string[] | null;
  /** The entry's own `rate_share` and `max_requests_per_second`; what it leaves out is FEED_RATE_SHARE's and FEED_MAX_REQUESTS_PER_SECOND's. */
  readonly budget?: SourceBudget;
}

/** What an entry falls back to: FEED_BASE_URL, FEED_API_KEY, FEED_TYPES. */
export interface SourceDefaults {
  baseUrl: string | null;
  apiKey: string | null;
  types: readonly string[] | null;
}

export interface SourcesFileDeps {
  /** The environment, for `api_key_env`. */
  env: Record<string, string | undefined>;
  readFile: (path: string) => string;
  /** Checks and normalises a list of type names, or throws a message naming the bad one. */
  parseTypes: (types: readonly string[]) => readonly string[] | null;
  /** False: an api_key_file is checked as a path but not read; its entry gets no key and no key problem. Default true. */
  readKeyFiles?: boolean;
}

const FIELDS = new Set([
  'source',
  'base_url',
  'api_key_file',
  'api_key_env',
  'types',
  'rate_share',
  'max_requests_per_second',
]);
const SOURCE_NAME = /^\S{1,200}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Reads FEED_SOURCES_FILE: `{"sources": [{source, base_url?, api_key_file? | api_key_env?, types?}]}`.
 * Every mistake is a ConfigError naming the entry and the field. Messages never
 * repeat the value of a key field: a key pasted there by mistake stays out of the logs.
 */
export function loadSourcesFile(path: string, defaults: SourceDefaults, deps: SourcesFileDeps): FeedSource[] {
  const fail = (what: string): never => {
    throw new ConfigError(`FEED_SOURCES_FILE ${path}: ${what}`);
  };
  let text: string;
  try {
    text = deps.readFile(path);
  } catch (err) {
    return fail(`cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    return fail(`is not JSON (${jsonProblem(err, text)})`);
  }
  if (!isObject(doc) || !Array.isArray(doc.sources)) return fail('must be an object {"sources": [...]}');
  for (const key of Object.keys(doc)) if (key !== 'sources') fail(`unknown field "${key}" at the top level`);
  if (doc.sources.length === 0) fail('"sources" is empty');

  const seen = new Map<string, number>();
  return doc.sources.map((entry: unknown, i: number): FeedSource => {
    const at = (name: string | null, field: string, what: string): never =>
      fail(`sources[${i}]${name === null ? '' : ` ("${name}")`}: ${field}: ${what}`);
    if (!isObject(entry)) return at(null, 'entry', 'must be an object');
    const name = entry.source;
    if (name === undefined) return at(null, 'source', 'is required');
    if (typeof name !== 'string') return at(null, 'source', 'must be a string');
    const problem = sourceNameProblem(name);
    if (problem) return at(null, 'source', problem);
    // A file's names have no spaces either: one per entry, easy to pass as --source.
    if (!SOURCE_NAME.test(name)) return at(null, 'source', 'must be 1 to 200 characters without spaces');
    const unknown = Object.keys(entry).find((k) => !FIELDS.has(k));
    if (unknown !== undefined) at(name, unknown, 'unknown field');
    const first = seen.get(name);
    if (first !== undefined) at(name, 'source', `duplicate of sources[${first}]`);
    seen.set(name, i);

    const baseUrl = readBaseUrl(entry.base_url, defaults.baseUrl, (f, w) => at(name, f, w));
    const { apiKey, keyProblem } = readKey(entry, defaults.apiKey, deps, (f, w) => at(name, f, w));
    let types = defaults.types;
    if (entry.types !== undefined) {
      const list = entry.types;
      if (!Array.isArray(list) || list.length === 0 || !list.every((t) => typeof t === 'string'))
        return at(name, 'types', 'must be a non-empty list of type names');
      try {
        types = deps.parseTypes(list);
      } catch (err) {
        return at(name, 'types', (err as Error).message);
      }
      if (types === null) at(name, 'types', 'must be a non-empty list of type names');
    }
    const budget = readBudget(entry, (f, w) => at(name, f, w));
    return { source: name, baseUrl, apiKey, keyProblem, types, ...(budget ? { budget } : {}) };
  });
}

type Fail = (field: string, what: string) => never;

function readBaseUrl(value: unknown, fallback: string | null, fail: Fail): string {
  if (value === undefined) {
    if (fallback === null) return fail('base_url', 'required when FEED_BASE_URL is unset');
    return fallback;
  }
  if (typeof value !== 'string') return fail('base_url', 'must be a string');
  const problem = checkBaseUrl(value);
  if (problem) return fail('base_url', problem);
  return value.replace(/\/+$/, '');
}

/** `rate_share` and `max_requests_per_second` (null: no cap for this source), or undefined when neither is set. */
function readBudget(entry: Record<string, unknown>, fail: Fail): SourceBudget | undefined {
  const budget: { share?: number; maxPerSecond?: number | null } = {};
  const read = <T>(field: string, value: unknown, parse: (v: unknown) => T): T => {
    try {
      return parse(value);
    } catch (err) {
      return fail(field, (err as Error).message);
    }
  };
  if (entry.rate_share !== undefined) budget.share = read('rate_share', entry.rate_share, readRateShare);
  const cap = entry.max_requests_per_second;
  if (cap !== undefined)
    budget.maxPerSecond = cap === null ? null : read('max_requests_per_second', cap, readMaxPerSecond);
  return Object.keys(budget).length === 0 ? undefined : budget;
}

/**
 * Why `name` cannot be a source (the cursor key, a metric label, part of a job id), or
 * null: 1 to 200 characters, no control character (NUL among them: Postgres text cannot
 * hold it), no lone UTF-16 surrogate (Postgres and a UTF-8 label cannot hold one, and
 * two names that differ only there would be stored as one).
 */
export function sourceNameProblem(name: string): string | null {
  if (/\p{Cs}/u.test(name)) return 'must not hold a lone UTF-16 surrogate';
  if (/\p{Cc}/u.test(name)) return 'must not hold a control character';
  if (name.length === 0 || name.length > 200) return 'must be 1 to 200 characters';
  return null;
}

/**
 * The entry's key. A key file that cannot be read or is empty is the source's problem
 * alone (a secret not mounted yet, a typo in one entry): it comes back as keyProblem,
 * and the source fails each turn; every other mistake stops the program.
 */
function readKey(
  entry: Record<string, unknown>,
  fallback: string | null,
  deps: SourcesFileDeps,
  fail: Fail,
): { apiKey: string | null; keyProblem: string | null } {
  const { api_key_file: file, api_key_env: envName } = entry;
  if (file !== undefined && envName !== undefined)
    return fail('api_key_file', 'set either api_key_file or api_key_env, not both');
  let key: string | undefined;
  if (file !== undefined) {
    if (typeof file !== 'string' || file === '') return fail('api_key_file', 'must be a path');
    if (deps.readKeyFiles === false) return { apiKey: null, keyProblem: null };
    try {
      key = deps.readFile(file).trim();
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'error';
      // Not the path: a key pasted there by mistake would reach status and the logs.
      return { apiKey: null, keyProblem: `api_key_file cannot be read (${code})` };
    }
    if (key === '') return { apiKey: null, keyProblem: 'api_key_file: the file is empty' };
  } else if (envName !== undefined) {
    if (typeof envName !== 'string' || !ENV_NAME.test(envName))
      return fail('api_key_env', 'must be the name of an environment variable');
    key = deps.env[envName];
    if (!key) return fail('api_key_env', 'the variable is unset or empty');
  } else {
    if (fallback === null)
      return fail('api_key_file', 'no key: set api_key_file or api_key_env, or FEED_API_KEY');
    key = fallback;
  }
  return { apiKey: key, keyProblem: null };
}

/**
 * JSON.parse's complaint on one line: without the file's text that V8 quotes (lines of
 * it, and maybe a key pasted in by mistake), with the line and column of a position.
 */
function jsonProblem(err: unknown, text: string): string {
  const message = (err as Error).message.replace(/, ".*" is not valid JSON$/s, '').replace(/\s+/g, ' ');
  const position = /at position (\d+)/.exec(message);
  // Newer V8 says the line itself.
  if (!position || /\bline \d+/.test(message)) return message;
  const before = text.slice(0, Number(position[1]));
  const line = before.split('\n').length;
  return `${message}: line ${line}, column ${before.length - before.lastIndexOf('\n')}`;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
