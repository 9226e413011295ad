import http from 'node:http';
import https from 'node:https';
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
}

/** A socket that stayed silent for the whole timeout: while connecting, before the headers or mid-body. */
class SilenceError extends Error {}

/**
 * A keep-alive pool (node:http or node:https, by the base URL) that sends authorised
 * JSON requests and turns every non-2xx answer, timeout and network error into an
 * ApiError. It never retries: that is the caller's choice (see retry.ts). Errors
 * never carry the key. node:http rather than undici: it is part of Node, so a
 * CronJob run that finds nothing new starts without loading an HTTP client.
 */
export function createTransport(opts: TransportOptions): { request: RequestFn; close: () => Promise<void> } {
  const base = new URL(opts.baseUrl);
  const prefix = base.pathname.replace(/\/+$/, '');
  const now = opts.now ?? Date.now;
  const client = base.protocol === 'https:' ? https : http;
  const agent = new client.Agent({ keepAlive: true, maxSockets: opts.connections ?? 4 });

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

    let res: { status: number; retryAfter: string | undefined; body: Buffer };
    try {
      res = await new Promise((resolve, reject) => {
        const outgoing = client.request({
          protocol: base.protocol,
          hostname: base.hostname.replace(/^\[|\]$/g, ''),
          port: base.port,
          method: req.method,
          path,
          headers,
          agent,
          // Socket inactivity: it covers connecting, waiting for the headers and each gap in the body.
          timeout: opts.timeoutMs,
          ...(req.signal ? { signal: req.signal } : {}),
        });
        // Reject before destroying: the destroyed socket also fails the request, as a plain reset.
        outgoing.on('timeout', () => {
          reject(new SilenceError('socket silent'));
          outgoing.destroy();
        });
        outgoing.on('error', reject);
        outgoing.on('response', (incoming) => {
          const status = incoming.statusCode ?? 0;
          const ra = incoming.headers['retry-after'];
          const chunks: Buffer[] = [];
          let size = 0;
          incoming.on('data', (chunk: Buffer) => {
            size += chunk.length;
            if (size > opts.maxResponseBytes) {
              reject(
                new ApiError(
                  `${req.method} ${req.path}: response larger than ${opts.maxResponseBytes} bytes`,
                  {
                    code: 'RESPONSE_TOO_LARGE',
                    status,
                    exitCode: 1,
                  },
                ),
              );
              outgoing.destroy();
              return;
            }
            chunks.push(chunk);
          });
          incoming.on('error', reject);
          incoming.on('end', () => {
            if (incoming.complete) {
              resolve({ status, retryAfter: Array.isArray(ra) ? ra[0] : ra, body: Buffer.concat(chunks) });
            }
          });
          // A body cut short (the socket closed before Content-Length was reached) is a network
          // error; after a complete body this changes nothing.
          incoming.on('close', () => reject(new Error('the connection closed before the body was complete')));
        });
        outgoing.end(body ?? undefined);
      });
    } catch (err) {
      if (err instanceof ApiError) throw err;
      if (req.signal?.aborted) throw err;
      throw networkError(req, err);
    }
    if (res.status >= 200 && res.status < 300) return { status: res.status, body: res.body };
    throw statusError(req, res.status, res.body, parseRetryAfter(res.retryAfter, now()));
  };

  return {
    request,
    close: async () => {
      agent.destroy();
    },
  };
}

function networkError(req: HttpRequest, err: unknown): ApiError {
  const e = err as { code?: string; message?: string };
  const code = err instanceof SilenceError ? 'TIMEOUT' : 'NETWORK';
  return new ApiError(
    `${req.method} ${req.path}: ${code === 'TIMEOUT' ? 'timed out' : 'network error'} (${e.code ?? e.message ?? 'unknown'})`,
    {
      code,
      status: 0,
      cause: err,
    },
  );
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
