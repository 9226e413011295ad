import { request } from 'undici';
import type { Simulator } from '../../src/simulator/index.js';
import { TEST_API_KEY } from '../support/simulator.js';

export interface CallOptions {
  /** A value to send as JSON (with Content-Type: application/json), or a raw string. */
  body?: unknown;
  headers?: Record<string, string>;
  /** The API key; null sends no Authorization header. */
  key?: string | null;
}

export interface CallResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  // biome-ignore lint/suspicious/noExplicitAny: tests read whatever JSON came back
  body: any;
}

/** One request to the simulator; `path` is relative to its origin (`/api/events`, `/_sim/stats`). */
export async function call(
  sim: Simulator,
  method: string,
  path: string,
  opts: CallOptions = {},
): Promise<CallResult> {
  const headers: Record<string, string> = {};
  const key = opts.key === undefined ? TEST_API_KEY : opts.key;
  if (key !== null) headers.authorization = `Bearer ${key}`;
  let body: string | undefined;
  if (typeof opts.body === 'string') body = opts.body;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] = 'application/json';
  }
  const res = await request(`${sim.origin}${path}`, {
    method: method as 'GET',
    headers: { ...headers, ...opts.headers },
    ...(body === undefined ? {} : { body }),
  });
  const text = await res.body.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Left as text: a test of a broken body looks at it raw.
  }
  return { status: res.statusCode, headers: res.headers, body: parsed };
}

export const EMAIL = { from: 'app@example.test', subject: 'Hello', html: '<p>Hi</p>' };
