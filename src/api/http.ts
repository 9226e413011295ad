import { Pool, errors as undiciErrors } from 'undici';
import { ApiError, AuthError } from '../errors.js';
import { parseRetryAfter, RetryAfterError } from './retry.js';

export interface HttpRequest {
  method: 'GET' | 'POST' | 'DELETE';
  /** Path below the base URL, starting with `/`. */
  path: string;
  query?: Record<string, string | undefined>;
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

export interface HttpResponse {
  status: number;
  body: Buffer;
  /** Response headers, names in lowercase (a test's RequestFn may leave them out). */
  headers?: Record<string, string | string[] | undefined>;
}

/** The one function the API client needs to reach the service: a test can pass its own. */
export type RequestFn = (req: HttpRequest) => Promise<HttpResponse>;

export interface TransportOptions {
  baseUrl: string;
  apiKey: string;
  /** Connect, headers and body timeout, each. */
  timeoutMs: number;
  /** A larger body is refused (RESPONSE_TOO_LARGE). */
  maxResponseBytes: number;
  /** Keep-alive connections to the service. Default 4. */
  connections?: number;
  now?: () => number;
  /** Told of every answer's status and headers as they arrive, refusals included (the request budget reads them). */
  onHeaders?: (status: number, headers: NonNullable<HttpResponse['headers']>) => void;
}

/**
 * A keep-alive undici pool that sends authorised JSON requests and turns every
 * non-2xx answer, timeout and network error into an ApiError. It never retries:
 * that is the caller's choice (see retry.ts). Errors never carry the key.
 */
export function createTransport(opts: TransportOptions): { request: RequestFn; close: () => Promise<void> } {
  const base = new URL(opts.baseUrl);
  const prefix = base.pathname.replace(/\/+$/, '');
  const now = opts.now ?? Date.now;
  const pool = new Pool(base.origin, {
    connections: opts.connections ?? 4,
    connectTimeout: opts.timeoutMs,
    headersTimeout: opts.timeoutMs,
    bodyTimeout: opts.timeoutMs,
    keepAliveTimeout: 30_000,
  });

  const request: RequestFn = async (req) => {
    const search = new URLSearchParams();
    for (const [k, v] of Object.entries(req.query ?? {})) if (v !== undefined) search.set(k, v);
    const qs = search.toString();
    const path = `${prefix}${req.path}${qs ? `?${qs}` : ''}`;
    const headers: Record<string, string> = {
      authorization: `Bearer ${opts.apiKey}`,
      accept: 'application/json',
      ...req.headers,
    };
    let body: string | null = null;
    if (req.body !== undefined) {
      body = JSON.stringify(req.body);
      headers['content-type'] = 'application/json';
    }

    let status: number;
    let resHeaders: HttpResponse['headers'];
    let retryAfter: string | undefined;
    let chunks: Buffer[];
    try {
      const res = await pool.request({ method: req.method, path, headers, body, signal: req.signal ?? null });
      status = res.statusCode;
      resHeaders = res.headers;
      opts.onHeaders?.(status, res.headers);
      const ra = res.headers['retry-after'];
      retryAfter = Array.isArray(ra) ? ra[0] : ra;
      chunks = [];
      let size = 0;
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > opts.maxResponseBytes) {
          res.body.destroy();
          throw new ApiError(
            `${req.method} ${req.path}: response larger than ${opts.maxResponseBytes} bytes`,
            {
              code: 'RESPONSE_TOO_LARGE',
              status,
              exitCode: 1,
            },
          );
        }
        chunks.push(chunk);
      }
    } catch (err) {
      if (err instanceof ApiError) throw err;
      if (req.signal?.aborted) throw err;
      throw networkError(req, base.host, err);
    }
    const buf = Buffer.concat(chunks);
    if (status >= 200 && status < 300) return { status, body: buf, headers: resHeaders };
    throw statusError(req, status, buf, parseRetryAfter(retryAfter, now()));
  };

  return { request, close: () => pool.close() };
}

/** OpenSSL's and Node's TLS failures: a protocol mismatch or a certificate not trusted. */
const TLS_FAILURE = /^(ERR_SSL_|ERR_TLS_|CERT_)|_CERT|SELF_SIGNED|UNABLE_TO_(VERIFY|GET_ISSUER)/;

/** No answer: names the host and port, so the one line a user sees says where it failed. */
function networkError(req: HttpRequest, host: string, err: unknown): ApiError {
  const e = err as { code?: string; message?: string };
  const code =
    err instanceof undiciErrors.HeadersTimeoutError ||
    err instanceof undiciErrors.BodyTimeoutError ||
    err instanceof undiciErrors.ConnectTimeoutError
      ? 'TIMEOUT'
      : typeof e.code === 'string' && TLS_FAILURE.test(e.code)
        ? 'TLS'
        : 'NETWORK';
  const what =
    code === 'TIMEOUT'
      ? `${host} timed out`
      : code === 'TLS'
        ? `no TLS session with ${host}`
        : `cannot reach ${host}`;
  return new ApiError(`${req.method} ${req.path}: ${what} (${e.code ?? e.message ?? 'unknown'})`, {
    code,
    status: 0,
    cause: err,
  });
}

function statusError(
  req: HttpRequest,
  status: number,
  body: Buffer,
  retryAfterMs: number | undefined,
): ApiError {
  let serviceCode: string | undefined;
  let serviceMessage: string | undefined;
  try {
    const parsed = JSON.parse(body.toString('utf8')) as {
      error?: unknown;
      message?: unknown;
      code?: unknown;
    };
    const inner = (typeof parsed.error === 'object' && parsed.error !== null ? parsed.error : parsed) as {
      code?: unknown;
      message?: unknown;
    };
    if (typeof inner.code === 'string') serviceCode = inner.code;
    if (typeof inner.message === 'string') serviceMessage = inner.message.slice(0, 500);
    else if (typeof parsed.error === 'string') serviceMessage = parsed.error.slice(0, 500);
  } catch {
    // Not JSON: the status says enough.
  }
  if (status === 401 || status === 403) return new AuthError(status, serviceMessage);
  const what = serviceMessage ? `: ${serviceMessage}` : '';
  // HTTP has no status outside 100–599: whatever answered does not speak it, and a retry meets the same.
  if (status < 100 || status > 599) {
    return new ApiError(`${req.method} ${req.path}: HTTP status ${status} is outside HTTP's 100–599${what}`, {
      code: 'BAD_STATUS',
      status,
    });
  }
  const error = new ApiError(`${req.method} ${req.path}: HTTP ${status}${what}`, {
    code:
      status === 429
        ? 'RATE_LIMITED'
        : status >= 500
          ? 'SERVER_ERROR'
          : status === 409
            ? 'CONFLICT'
            : 'REQUEST_REJECTED',
    status,
    serviceCode,
    serviceMessage,
  });
  return retryAfterMs === undefined ? error : new RetryAfterError(error, retryAfterMs);
}
