import type { Config } from '../config/config-type.js';
import { hostOf, splitUrls } from '../config/connection-url.js';
import { ApiError, AuthError, FeedsyncError, RedisError } from '../errors.js';
import { shellQuote } from '../shell-quote.js';

/** A message as a clause of the line: "Connection is closed." reads "Connection is closed" before a colon. */
function clause(message: string): string {
  return message.replace(/\.+$/, '');
}

/** Connection failures of the operating system: nothing answered at that address. */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
]);

interface SystemError {
  code?: unknown;
  address?: unknown;
  port?: unknown;
  severity?: unknown;
  name?: unknown;
  message?: unknown;
}

/**
 * The one line a command prints for an error that ends it: what failed, where,
 * and what to do. Names variables and hosts, never values that could be secrets.
 */
export function describeFailure(err: unknown, config: Config | null): string {
  if (err instanceof AuthError) {
    return `${err.message}: check FEED_API_KEY (or FEED_API_KEY_FILE), a key of this account, and FEED_BASE_URL`;
  }
  if (err instanceof ApiError && err.code === 'TLS') {
    return `${err.message}: check FEED_BASE_URL (https:// to a server that speaks http?) and the server's certificate; not retried`;
  }
  if (err instanceof ApiError && err.status === 0) {
    return `${err.message}: check FEED_BASE_URL and that the service is up (retries are logged at info)`;
  }
  if (err instanceof RedisError && !err.message.includes('REDIS_URL')) {
    return `Redis (REDIS_URL): ${clause(err.message)}: check REDIS_URL and that the server runs`;
  }
  if (
    err instanceof FeedsyncError &&
    err.code === 'UNKNOWN_CURSOR' &&
    config &&
    config.feed.source !== 'default'
  ) {
    return `${err.message} (with --source ${shellQuote(config.feed.source)})`;
  }
  if (err instanceof FeedsyncError) return err.message;
  const e = (err ?? {}) as SystemError;
  const message = typeof e.message === 'string' && e.message ? e.message : String(err);
  // pg's own words when a statement passed the client's query_timeout (bounded-client.ts).
  if (message === 'Query read timeout' && config) {
    return (
      `Postgres at ${hostOf(config.database.url)} (DATABASE_URL) did not answer a statement within ` +
      `${config.database.statementTimeoutMs} ms (DATABASE_STATEMENT_TIMEOUT_MS); its connection was dropped: ` +
      'check the server (locks, load, a connection that stopped answering); a commit that was in flight may ' +
      'have taken or not (feedsync status shows the cursor as stored): the next run goes on from that cursor'
    );
  }
  if (isPostgresError(e)) {
    return `Postgres (DATABASE_URL) refused: ${clause(message)} (SQLSTATE ${String(e.code)}): ${postgresHint(String(e.code))}`;
  }
  if (typeof e.code === 'string' && UNREACHABLE.has(e.code) && config) {
    const where = serviceAt(config, e.port);
    if (where === 'postgres') {
      return `cannot reach Postgres at ${hostOf(config.database.url)} (${e.code}): check DATABASE_URL and that the server runs`;
    }
    if (where === 'redis') {
      return `cannot reach Redis at ${hostOf(config.redis.url)} (${e.code}): check REDIS_URL and that the server runs`;
    }
  }
  if (isRedisError(e, message)) {
    return `Redis (REDIS_URL) failed: ${clause(message)}: check REDIS_URL and that the server runs`;
  }
  if (/timeout|terminated/i.test(message) && /connection/i.test(message)) {
    return `Postgres (DATABASE_URL): ${clause(message)}: check DATABASE_URL and that the server runs`;
  }
  return `${message} (LOG_LEVEL=debug logs the stack trace)`;
}

/**
 * Which of the two stores an error came from, when it tells: Postgres's own errors
 * (SQLSTATE), a connection refused at the port of DATABASE_URL, and pg's messages about
 * its connections; Redis's errors and a connection refused at the port of REDIS_URL.
 */
export function storeOf(err: unknown, config: Config): 'postgres' | 'redis' | null {
  if (err instanceof RedisError) return 'redis';
  const e = (err ?? {}) as SystemError;
  const message = typeof e.message === 'string' ? e.message : '';
  if (isPostgresError(e)) return 'postgres';
  if (typeof e.code === 'string' && UNREACHABLE.has(e.code)) {
    const where = serviceAt(config, e.port);
    if (where) return where;
  }
  if (isRedisError(e, message)) return 'redis';
  if (/timeout|terminated/i.test(message) && /connection/i.test(message)) return 'postgres';
  return null;
}

function isPostgresError(e: SystemError): boolean {
  return typeof e.severity === 'string' && typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code);
}

function postgresHint(code: string): string {
  if (code === '28P01' || code === '28000') return 'check the user and password in DATABASE_URL';
  if (code === '3D000') return 'check the database name in DATABASE_URL, or create it';
  if (code === '42501')
    return 'grant this user the rights it needs on DATABASE_SCHEMA (see docs/DEPLOYMENT.md)';
  if (code.startsWith('57P') || code.startsWith('08'))
    return 'the server is shutting down or restarting; try again';
  if (code === '53300')
    return (
      'the server is at max_connections: close idle sessions or other clients, lower ' +
      'SYNC_CONCURRENCY here, or raise max_connections (or put a pooler in front); try again'
    );
  return 'see the Postgres log for the statement';
}

/** ioredis and the publisher name their own failures. */
function isRedisError(e: SystemError, message: string): boolean {
  return (
    e.name === 'ReplyError' ||
    e.name === 'MaxRetriesPerRequestError' ||
    /^Redis\b/.test(message) ||
    message === 'Connection is closed.' ||
    message.includes('enableOfflineQueue')
  );
}

/** Which configured service listens on the port of a refused connection. */
function serviceAt(config: Config, port: unknown): 'postgres' | 'redis' | null {
  if (typeof port !== 'number') return null;
  const pg = portOf(config.database.url, 5432);
  const redis = portOf(config.redis.url, 6379);
  if (pg === port && redis !== port) return 'postgres';
  if (redis === port && pg !== port) return 'redis';
  return null;
}

function portOf(url: string, fallback: number): number | null {
  try {
    const u = new URL(splitUrls(url)[0]!);
    return u.port ? Number(u.port) : fallback;
  } catch {
    return null;
  }
}
