import { setTimeout as sleepTimer } from 'node:timers/promises';
import { ApiError } from '../errors.js';
import type { Logger } from '../logger.js';

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
  /** Called before each wait: for logs and metrics. */
  onRetry?: (info: { attempt: number; waitMs: number; error: ApiError }) => void;
}

/**
 * An onRetry that logs each wait at info, with its cause: without it, a service
 * that is down is minutes of silence before the run fails.
 */
export function logRetries(log: Pick<Logger, 'info'>, maxRetries: number): NonNullable<RetryDeps['onRetry']> {
  return ({ attempt, waitMs, error }) =>
    log.info(
      { attempt, maxRetries, waitMs, status: error.status, code: error.code },
      `${error.message}; retry ${attempt} of ${maxRetries} in ${(waitMs / 1000).toFixed(1)} s`,
    );
}

export const defaultSleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  sleepTimer(ms, undefined, signal ? { signal } : undefined);

/** Parses Retry-After (delta seconds or an HTTP date) into milliseconds from now; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, now: number): number | undefined {
  if (value === undefined) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** Whether an error is worth another try: 429, 5xx and no answer at all. */
export function isRetryable(err: unknown): err is ApiError {
  return err instanceof ApiError && (err.status === 0 || err.status === 429 || err.status >= 500);
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
      if (!isRetryable(err) || (opts.retryable && !opts.retryable(err)) || n >= policy.maxRetries) throw err;
      if (opts.signal?.aborted) throw err;
      const backoff = Math.floor(random() * Math.min(cap, base * 2 ** n));
      const asked = err instanceof RetryAfterError ? err.retryAfterMs : undefined;
      const waitMs = Math.max(backoff, asked ?? 0);
      if (waitMs > policy.maxRetryWaitMs) {
        throw new ApiError(
          `the service asked to wait ${Math.ceil(waitMs / 1000)} s, longer than FEED_MAX_RETRY_WAIT_MS allows`,
          { code: 'RETRY_WAIT_TOO_LONG', status: err.status, cause: err },
        );
      }
      deps.onRetry?.({ attempt: n + 1, waitMs, error: err });
      await sleep(waitMs, opts.signal);
    }
  }
}
