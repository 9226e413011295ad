import type { ServerResponse } from 'node:http';
import type { SimError } from './errors.js';

/** What a route handler answers; the server writes it (and applies body faults on the feed). */
export interface Reply {
  status: number;
  /** Sent as JSON, unless `asset` is set. */
  body: unknown;
  headers?: Record<string, string>;
  /** A file of the dashboard, sent as it is with its own Content-Type. */
  asset?: { bytes: Buffer; contentType: string };
}

export function jsonBytes(body: unknown): Buffer {
  return Buffer.from(JSON.stringify(body), 'utf8');
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Readonly<Record<string, string>> = {},
): void {
  const bytes = jsonBytes(body);
  res.writeHead(status, {
    ...headers,
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(bytes.length),
  });
  res.end(bytes);
}

/** A dashboard file: same-origin scripts only, never framed, never cached (the simulator may be rebuilt). */
export function sendAsset(res: ServerResponse, asset: { bytes: Buffer; contentType: string }): void {
  res.writeHead(200, {
    'content-type': asset.contentType,
    'content-length': String(asset.bytes.length),
    'content-security-policy':
      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    'x-content-type-options': 'nosniff',
    'cache-control': 'no-store',
  });
  res.end(asset.bytes);
}

export function sendError(res: ServerResponse, err: SimError): void {
  sendJson(res, err.status, { error: { code: err.code, message: err.message } }, err.headers);
}
