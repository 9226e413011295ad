import { ConfigError } from '../errors.js';

/**
 * Passwords inside connection strings (DATABASE_URL, REDIS_URL), in every form the
 * drivers honour: `scheme://user:PASSWORD@host`, and query parameters such as
 * `?password=…`, `?sslpassword=…` or `?sentinelPassword=…`. A value may list several
 * URLs, comma-separated (Redis seed nodes).
 */

/** Query parameters whose value is a secret: any name that holds "pass", "secret" or "token". */
const SECRET_PARAM = /pass|secret|token/i;

/** One URL per seed: `redis://a:6379,redis://b:6379` is two. */
export function splitUrls(value: string): string[] {
  return value.split(/,(?=\s*[a-z][a-z0-9+.-]*:\/\/)/i).map((part) => part.trim());
}

/**
 * Every secret of a connection string, as written and %-decoded, for the logger
 * to scrub wherever it appears. An unparseable URL yields nothing (the config
 * check refuses it before anything is logged).
 */
export function urlSecrets(value: string): string[] {
  const secrets: string[] = [];
  for (const part of splitUrls(value)) {
    let url: URL;
    try {
      url = new URL(part);
    } catch {
      continue;
    }
    if (url.password) secrets.push(url.password, safeDecode(url.password));
    for (const [name, param] of url.searchParams) {
      if (SECRET_PARAM.test(name) && param) secrets.push(param, encodeURIComponent(param));
    }
    // searchParams decodes; the raw text of the query may spell the value otherwise (`%2B` for `+`).
    for (const raw of url.search.slice(1).split('&')) {
      const [name = '', param = ''] = raw.split('=', 2);
      if (SECRET_PARAM.test(name) && param) secrets.push(param);
    }
  }
  return [...new Set(secrets)];
}

/** `host:port` of the first URL of a connection string: where, without user or password. */
export function hostOf(value: string): string {
  try {
    return new URL(splitUrls(value)[0]!).host;
  } catch {
    return '(unparseable URL)';
  }
}

/** The connection string with every password replaced, safe to print. */
export function redactUrl(value: string): string {
  const parts = splitUrls(value).map((part) => {
    let url: URL;
    try {
      url = new URL(part);
    } catch {
      return '[unparseable URL]';
    }
    if (url.password) url.password = 'REDACTED';
    for (const name of [...url.searchParams.keys()]) {
      if (SECRET_PARAM.test(name)) url.searchParams.set(name, 'REDACTED');
    }
    return url.toString();
  });
  return parts.join(',');
}

/**
 * Takes passwords out of free text (an error message, a log line): the password
 * of any `scheme://user:password@` and the value of any secret-named query parameter.
 */
export function redactUrlsInText(text: string): string {
  return text
    .replace(/(\b[a-z][a-z0-9+.-]*:\/\/[^:/@\s"]*:)[^@\s"]+@/gi, '$1[REDACTED]@')
    .replace(/([?&][a-z_]*(?:pass|secret|token)[a-z_]*=)[^&\s"#,]+/gi, '$1[REDACTED]');
}

/**
 * Why the drivers would fail to read the user info or the query of this URL, or
 * null. A `%` that starts no valid escape makes them throw "URI malformed" at
 * connect time; naming it at start is kinder. Never quotes the value.
 */
export function urlEscapeProblem(url: URL): string | null {
  if (!decodes(url.username)) return 'the user name holds a bad %-escape (write a literal % as %25)';
  if (!decodes(url.password)) return 'the password holds a bad %-escape (write a literal % as %25)';
  if (!decodes(url.pathname)) return 'the path holds a bad %-escape (write a literal % as %25)';
  if (!decodes(url.search)) return 'the query holds a bad %-escape (write a literal % as %25)';
  return null;
}

function decodes(text: string): boolean {
  try {
    decodeURIComponent(text);
    return true;
  } catch {
    return false;
  }
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** Each URL of the value parses, has an allowed scheme, and %-decodes as the drivers will decode it. */
export function checkUrl(name: string, value: string, protocols: string[]): void {
  for (const part of splitUrls(value)) {
    let url: URL;
    try {
      url = new URL(part);
    } catch {
      throw new ConfigError(`${name}: not a valid URL`);
    }
    if (!protocols.includes(url.protocol)) {
      throw new ConfigError(`${name}: must start with ${protocols.map((p) => `${p}//`).join(' or ')}`);
    }
    const problem = urlEscapeProblem(url);
    if (problem) throw new ConfigError(`${name}: ${problem}`);
  }
}
