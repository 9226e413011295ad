import type { IncomingMessage } from 'node:http';
import { badRequest, SimError } from './errors.js';

/** Larger request bodies are refused with 413. */
const MAX_BODY_BYTES = 1024 * 1024;

export type JsonObject = Record<string, unknown>;

/**
 * Reads a request body and parses it as a JSON object. With `requireJson`, a
 * Content-Type other than application/json is refused with 415 before reading.
 */
export async function readJsonObject(
  req: IncomingMessage,
  opts: { requireJson: boolean },
): Promise<JsonObject> {
  if (opts.requireJson && !isJsonContentType(req.headers['content-type'])) {
    throw new SimError(415, 'unsupported_media_type', 'Content-Type must be application/json');
  }
  const raw = await readRawBody(req);
  let value: unknown;
  try {
    value = JSON.parse(raw.toString('utf8'));
  } catch {
    throw badRequest('invalid_json', 'the request body is not valid JSON');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw badRequest('invalid_body', 'the request body must be a JSON object');
  }
  return value as JsonObject;
}

function isJsonContentType(header: string | undefined): boolean {
  const media = (header ?? '').split(';')[0]!.trim().toLowerCase();
  return media === 'application/json';
}

async function readRawBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    // Keep reading past the limit (discarding) so the client sees the 413 rather than a reset.
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
    }
  } catch {
    // The client went away mid-body: its fault, not ours, so never a 500.
    throw badRequest('invalid_body', 'the request body was cut short');
  }
  if (size > MAX_BODY_BYTES) {
    throw new SimError(413, 'payload_too_large', `the request body is larger than ${MAX_BODY_BYTES} bytes`);
  }
  return Buffer.concat(chunks);
}

/** A required non-empty string field. */
export function stringField(body: JsonObject, name: string, opts: { allowEmpty?: boolean } = {}): string {
  const value = body[name];
  if (value === undefined || value === null) throw badRequest('missing_field', `"${name}" is required`);
  if (typeof value !== 'string') throw badRequest('invalid_field', `"${name}" must be a string`);
  if (!opts.allowEmpty && value.trim() === '')
    throw badRequest('invalid_field', `"${name}" must not be empty`);
  return value;
}

/** A required non-empty array of non-empty strings; a lone string is taken as a list of one when allowed. */
export function stringListField(
  body: JsonObject,
  name: string,
  opts: { allowString?: boolean } = {},
): string[] {
  const value = body[name];
  if (value === undefined || value === null) throw badRequest('missing_field', `"${name}" is required`);
  const list = typeof value === 'string' && opts.allowString ? [value] : value;
  if (!Array.isArray(list) || list.some((v) => typeof v !== 'string' || v.trim() === '')) {
    throw badRequest('invalid_field', `"${name}" must be an array of non-empty strings`);
  }
  if (list.length === 0) throw badRequest('invalid_field', `"${name}" must not be empty`);
  return list as string[];
}
