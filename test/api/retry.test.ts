import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTransport } from '../../src/api/http.js';
import { parseRetryAfter, RetryAfterError, type RetryDeps, withRetries } from '../../src/api/retry.js';
import { ApiError, AuthError, exitCodeOf } from '../../src/errors.js';

const NOW = Date.UTC(2024, 4, 1, 12, 0, 0);

/** A sleep that records the waits and returns at once; a fixed clock. */
function fakeDeps(random: () => number = () => 0.5): RetryDeps & { waits: number[] } {
  const waits: number[] = [];
  return {
    waits,
    random,
    now: () => NOW,
    sleep: async (ms) => {
      waits.push(ms);
    },
  };
}

const unavailable = () => new ApiError('HTTP 503', { code: 'SERVER_ERROR', status: 503 });

/** An attempt that fails `failures` times with `error()` and then answers 'ok'. */
function flaky(
  failures: number,
  error: () => Error,
): { attempt: () => Promise<string>; calls: () => number } {
  let calls = 0;
  return {
    attempt: async () => {
      calls++;
      if (calls <= failures) throw error();
      return 'ok';
    },
    calls: () => calls,
  };
}

describe('withRetries', () => {
  it('waits with full jitter: between 0 and min(cap, base * 2^n)', async () => {
    const policy = { maxRetries: 6, maxRetryWaitMs: 60_000, baseDelayMs: 100, maxDelayMs: 1000 };
    const ceilings = [100, 200, 400, 800, 1000, 1000];
    const high = fakeDeps(() => 0.999_999);
    expect(await withRetries(flaky(6, unavailable).attempt, policy, high)).toBe('ok');
    expect(high.waits).toEqual(ceilings.map((c) => Math.floor(0.999_999 * c)));
    const low = fakeDeps(() => 0);
    await withRetries(flaky(6, unavailable).attempt, policy, low);
    expect(low.waits).toEqual([0, 0, 0, 0, 0, 0]);
    const seq = [0.3, 0.9, 0.1, 0.7, 0.5, 0.2];
    const mid = fakeDeps(() => seq.shift()!);
    await withRetries(flaky(6, unavailable).attempt, policy, mid);
    mid.waits.forEach((w, i) => {
      expect(w).toBeGreaterThanOrEqual(0);
      expect(w).toBeLessThan(ceilings[i]!);
    });
  });

  it('honours Retry-After even above the backoff cap', async () => {
    const deps = fakeDeps(() => 0.999);
    const policy = { maxRetries: 3, maxRetryWaitMs: 600_000, maxDelayMs: 1000 };
    const limited = () =>
      new RetryAfterError(new ApiError('HTTP 429', { code: 'RATE_LIMITED', status: 429 }), 120_000);
    expect(await withRetries(flaky(2, limited).attempt, policy, deps)).toBe('ok');
    expect(deps.waits).toEqual([120_000, 120_000]);
  });

  it('waits the backoff when it is longer than a small Retry-After', async () => {
    const deps = fakeDeps(() => 0.999);
    const small = () =>
      new RetryAfterError(new ApiError('HTTP 503', { code: 'SERVER_ERROR', status: 503 }), 10);
    await withRetries(
      flaky(1, small).attempt,
      { maxRetries: 1, maxRetryWaitMs: 1000, baseDelayMs: 500 },
      deps,
    );
    expect(deps.waits).toEqual([499]);
  });

  it('fails with RETRY_WAIT_TOO_LONG instead of waiting longer than maxRetryWaitMs', async () => {
    const deps = fakeDeps();
    const onRetry: unknown[] = [];
    const limited = () =>
      new RetryAfterError(new ApiError('HTTP 429', { code: 'RATE_LIMITED', status: 429 }), 3_600_000);
    const run = flaky(5, limited);
    const err = await withRetries(
      run.attempt,
      { maxRetries: 5, maxRetryWaitMs: 600_000 },
      { ...deps, onRetry: (i) => onRetry.push(i) },
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ code: 'RETRY_WAIT_TOO_LONG', status: 429, exitCode: 1 });
    expect((err as Error).message).toContain('FEED_MAX_RETRY_WAIT_MS');
    expect(deps.waits).toEqual([]);
    expect(onRetry).toEqual([]);
    expect(run.calls()).toBe(1);
  });

  it.each([401, 403])('does not retry %i: AuthError, exit code 3', async (status) => {
    const deps = fakeDeps();
    const run = flaky(5, () => new AuthError(status));
    const err = await withRetries(run.attempt, { maxRetries: 5, maxRetryWaitMs: 1000 }, deps).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AuthError);
    expect(exitCodeOf(err)).toBe(3);
    expect(run.calls()).toBe(1);
    expect(deps.waits).toEqual([]);
  });

  it('does not retry other 4xx answers', async () => {
    const run = flaky(5, () => new ApiError('HTTP 400', { code: 'REQUEST_REJECTED', status: 400 }));
    await expect(
      withRetries(run.attempt, { maxRetries: 5, maxRetryWaitMs: 1000 }, fakeDeps()),
    ).rejects.toMatchObject({ status: 400 });
    expect(run.calls()).toBe(1);
  });

  it('retries network errors (status 0) and throws the last error once the retries are spent', async () => {
    const deps = fakeDeps();
    let n = 0;
    const attempt = async (): Promise<string> => {
      n++;
      throw new ApiError(`attempt ${n}`, {
        code: n % 2 ? 'NETWORK' : 'SERVER_ERROR',
        status: n % 2 ? 0 : 502,
      });
    };
    const err = await withRetries(attempt, { maxRetries: 3, maxRetryWaitMs: 60_000 }, deps).catch(
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ message: 'attempt 4', code: 'SERVER_ERROR', exitCode: 1 });
    expect(n).toBe(4);
    expect(deps.waits).toHaveLength(3);
  });

  it('does not retry a TLS failure: the next try meets the same server', async () => {
    const deps = fakeDeps();
    const run = flaky(5, () => new ApiError('no TLS session', { code: 'TLS', status: 0 }));
    await expect(
      withRetries(run.attempt, { maxRetries: 5, maxRetryWaitMs: 1000 }, deps),
    ).rejects.toMatchObject({ code: 'TLS' });
    expect(run.calls()).toBe(1);
  });

  it('retries a refused connection 3 times at most, each wait at most 1 s, and says so', async () => {
    const deps = fakeDeps(() => 0.999);
    const told: number[] = [];
    const refused = () =>
      new ApiError('cannot reach', {
        code: 'NETWORK',
        status: 0,
        cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
      });
    const run = flaky(10, refused);
    await expect(
      withRetries(
        run.attempt,
        { maxRetries: 8, maxRetryWaitMs: 60_000 },
        { ...deps, onRetry: (i) => told.push(i.maxRetries) },
      ),
    ).rejects.toMatchObject({ code: 'NETWORK' });
    expect(run.calls()).toBe(4);
    expect(deps.waits).toEqual([249, 499, 999]);
    expect(told).toEqual([3, 3, 3]);
    // A budget below three is kept.
    const few = flaky(10, refused);
    await expect(
      withRetries(few.attempt, { maxRetries: 1, maxRetryWaitMs: 60_000 }, fakeDeps()),
    ).rejects.toThrow();
    expect(few.calls()).toBe(2);
  });

  it('stops retrying once the signal is aborted', async () => {
    const controller = new AbortController();
    const deps = fakeDeps();
    const run = flaky(5, () => {
      controller.abort();
      return unavailable();
    });
    await expect(
      withRetries(run.attempt, { maxRetries: 5, maxRetryWaitMs: 1000 }, deps, { signal: controller.signal }),
    ).rejects.toMatchObject({ status: 503 });
    expect(run.calls()).toBe(1);
  });
});

describe('parseRetryAfter', () => {
  it('reads delta seconds and HTTP dates against the clock', () => {
    expect(parseRetryAfter('7', NOW)).toBe(7000);
    expect(parseRetryAfter(' 0 ', NOW)).toBe(0);
    expect(parseRetryAfter(new Date(NOW + 90_000).toUTCString(), NOW)).toBe(90_000);
    expect(parseRetryAfter(new Date(NOW - 90_000).toUTCString(), NOW)).toBe(0);
    expect(parseRetryAfter('soon', NOW)).toBeUndefined();
    expect(parseRetryAfter(undefined, NOW)).toBeUndefined();
  });
});

describe('Retry-After over HTTP, through the transport', () => {
  let server: Server;
  let baseUrl: string;
  /** What the test server answers next, in order; then 200. */
  const script: { status: number; headers?: Record<string, string> }[] = [];
  let requests = 0;

  beforeAll(async () => {
    server = createServer((_req, res) => {
      requests++;
      const next = script.shift() ?? { status: 200 };
      res.writeHead(next.status, { 'content-type': 'application/json', ...next.headers });
      res.end(JSON.stringify(next.status === 200 ? { ok: true } : { error: { code: 'x', message: 'no' } }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  async function run(deps: RetryDeps, maxRetryWaitMs = 600_000) {
    const transport = createTransport({
      baseUrl,
      apiKey: 'sim_test_retry',
      timeoutMs: 5000,
      maxResponseBytes: 1 << 20,
      now: () => NOW,
    });
    try {
      return await withRetries(
        () => transport.request({ method: 'GET', path: '/events' }),
        { maxRetries: 4, maxRetryWaitMs, maxDelayMs: 1000 },
        deps,
      );
    } finally {
      await transport.close();
    }
  }

  it('waits what a 429 asks, in seconds or as an HTTP date, above the cap', async () => {
    script.push(
      { status: 429, headers: { 'retry-after': '45' } },
      { status: 503, headers: { 'retry-after': new Date(NOW + 300_000).toUTCString() } },
    );
    const deps = fakeDeps(() => 0);
    requests = 0;
    const res = await run(deps);
    expect(res.status).toBe(200);
    expect(requests).toBe(3);
    expect(deps.waits).toEqual([45_000, 300_000]);
  });

  it('fails at once when the date asked for lies beyond maxRetryWaitMs', async () => {
    script.push({ status: 429, headers: { 'retry-after': new Date(NOW + 3_600_000).toUTCString() } });
    const deps = fakeDeps(() => 0);
    requests = 0;
    await expect(run(deps)).rejects.toMatchObject({ code: 'RETRY_WAIT_TOO_LONG' });
    expect(requests).toBe(1);
    expect(deps.waits).toEqual([]);
  });

  it('turns 401 into AuthError without a retry', async () => {
    script.push({ status: 401 });
    const deps = fakeDeps();
    requests = 0;
    const err = await run(deps).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AuthError);
    expect((err as Error).message).not.toContain('sim_test_retry');
    expect(requests).toBe(1);
  });
});
