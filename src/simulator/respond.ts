import type { ServerResponse } from 'node:http';
import type { SimError } from './errors.js';

/** What a route handler answers; the server writes it (and applies body faults on the feed). */
export interface Reply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
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

export function sendError(res: ServerResponse, err: SimError): void {
  sendJson(res, err.status, { error: { code: err.code, message: err.message } }, err.headers);
}
