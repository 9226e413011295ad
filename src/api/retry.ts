import { ApiError } from '../errors.js';
import type { Logger } from '../logger.js';
import { defaultSleep } from '../sleep.js';

/** How a request is retried: exponential backoff with full jitter, never sooner than Retry-After. */
export interface RetryPolicy {
  /** Retries after the first attempt. */
  maxRetries: number;
  /** A wait longer than this (Retry-After included) fails instead of waiting. */
  maxRetryWaitMs: number;
  /** First backoff step; doubles each retry. Default 250 ms. */
  baseDelayMs?: number;
  /** The largest backoff step (Retry-After may ask for more). Default 30 s. */
  maxDelayMs?: number;
}

/** The clock and sleep a retry loop uses, injectable so tests never wait for real. */
export interface RetryDeps {
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  random?: () => number;
  now?: () => number;
  /** Called before each wait: for logs and metrics. `maxRetries` is what this error allows. */
  onRetry?: (info: { attempt: number; maxRetries: number; waitMs: number; error: ApiError }) => void;
}

/**
 * An onRetry that logs each wait at info, with its cause: without it, a service
 * that is down is minutes of silence before the run fails.
 */
export function logRetries(log: Pick<Logger, 'info'>): NonNullable<RetryDeps['onRetry']> {
  return ({ attempt, maxRetries, waitMs, error }) =>
    log.info(
      { attempt, maxRetries, waitMs, status: error.status, code: error.code },
      `${error.message}; retry ${attempt} of ${maxRetries} in ${(waitMs / 1000).toFixed(1)} s`,
    );
}

/** Parses Retry-After (delta seconds or an HTTP date) into milliseconds from now; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, now: number): number | undefined {
  if (value === undefined) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/**
 * Whether an error is worth another try: 429, 5xx and no answer at all, except a TLS
 * failure (https to a server that speaks http, a certificate this machine does not
 * trust) and a status outside 100–599 (not HTTP): the next try meets the same server.
 */
function isRetryable(err: unknown): err is ApiError {
  return (
    err instanceof ApiError &&
    ((err.status === 0 && err.code !== 'TLS') ||
      err.status === 429 ||
      (err.status >= 500 && err.status <= 599))
  );
}

/**
 * A refused connection: nothing listens at that address (the service is down, or the
 * URL's host or port is wrong). Tried at most REFUSED_RETRIES more times, each wait at
 * most REFUSED_MAX_DELAY_MS, about 2 s in all: a server restarting in place is back by
 * then, and a wrong URL is said at once instead of after half a minute of backoff.
 */
const REFUSED_RETRIES = 3;
const REFUSED_MAX_DELAY_MS = 1_000;

function isRefused(err: ApiError): boolean {
  return (err.cause as { code?: unknown } | undefined)?.code === 'ECONNREFUSED';
}

/** An ApiError that carries the server's requested wait. */
export class RetryAfterError extends ApiError {
  retryAfterMs: number | undefined;
  constructor(source: ApiError, retryAfterMs: number | undefined) {
    super(source.message, {
      code: source.code,
      status: source.status,
      serviceCode: source.serviceCode,
      serviceMessage: source.serviceMessage,
      cause: source.cause,
    });
    this.retryAfterMs = retryAfterMs;
  }
}

/**
 * Runs `attempt` until it succeeds, a non-retryable error is thrown, the retries
 * are spent, or the server asks for a wait longer than `maxRetryWaitMs`.
 * `retryable` narrows which errors are retried for this call (a POST without an
 * idempotency key retries only 429, which the server did not process).
 */
export async function withRetries<T>(
  attempt: () => Promise<T>,
  policy: RetryPolicy,
  deps: RetryDeps = {},
  opts: { signal?: AbortSignal; retryable?: (err: ApiError) => boolean } = {},
): Promise<T> {
  const sleep = deps.sleep ?? defaultSleep;
  const random = deps.random ?? Math.random;
  const base = policy.baseDelayMs ?? 250;
  const cap = policy.maxDelayMs ?? 30_000;
  for (let n = 0; ; n++) {
    try {
      return await attempt();
    } catch (err) {
      if (!isRetryable(err) || (opts.retryable && !opts.retryable(err))) throw err;
      const refused = isRefused(err);
      const maxRetries = refused ? Math.min(policy.maxRetries, REFUSED_RETRIES) : policy.maxRetries;
      if (n >= maxRetries || opts.signal?.aborted) throw err;
      const backoff = Math.floor(random() * Math.min(refused ? REFUSED_MAX_DELAY_MS : cap, base * 2 ** n));
      const asked = err instanceof RetryAfterError ? err.retryAfterMs : undefined;
      const waitMs = Math.max(backoff, asked ?? 0);
      if (waitMs > policy.maxRetryWaitMs) {
        throw new ApiError(
          `the service asked to wait ${Math.ceil(waitMs / 1000)} s, longer than FEED_MAX_RETRY_WAIT_MS allows`,
          { code: 'RETRY_WAIT_TOO_LONG', status: err.status, cause: err },
        );
      }
      deps.onRetry?.({ attempt: n + 1, maxRetries, waitMs, error: err });
      await sleep(waitMs, opts.signal);
    }
  }
}
