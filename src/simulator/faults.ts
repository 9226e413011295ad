import type { ServerResponse } from 'node:http';
import { badRequest } from './errors.js';
import type { Timers } from './timers.js';
import type { Faults } from './types.js';

export const DEFAULT_FAULTS: Readonly<Faults> = Object.freeze({
  latencyMs: 0,
  rate429: 0,
  retryAfterSec: 1,
  rate5xx: 0,
  duplicateRate: 0,
  slowBodyMs: 0,
  truncateRate: 0,
  hangRate: 0,
});

const RATES = new Set<keyof Faults>(['rate429', 'rate5xx', 'duplicateRate', 'truncateRate', 'hangRate']);
/** Durations are capped so that one knob cannot park a request for longer than a client would wait. */
const MAX_MS = 600_000;

/** `current` with `patch` applied; throws 400 for an unknown knob or a value out of range. */
export function mergeFaults(current: Faults, patch: unknown): Faults {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) {
    throw badRequest('invalid_body', 'faults must be a JSON object');
  }
  const next = { ...current };
  for (const [key, value] of Object.entries(patch)) {
    if (!(key in DEFAULT_FAULTS)) throw badRequest('invalid_field', `unknown fault "${key.slice(0, 64)}"`);
    const name = key as keyof Faults;
    const max = RATES.has(name) ? 1 : name === 'retryAfterSec' ? 86_400 : MAX_MS;
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > max) {
      throw badRequest('invalid_field', `"${name}" must be a number from 0 to ${max}`);
    }
    next[name] = name === 'retryAfterSec' ? Math.round(value) : value;
  }
  return next;
}

/** True with probability `rate`; never for 0, always for 1. */
export function chance(rate: number, random: () => number): boolean {
  return rate > 0 && random() < rate;
}

export interface BodyFaults {
  /** Spread the body over this many ms. */
  slowMs: number;
  /** Send half the body, then destroy the socket. */
  truncate: boolean;
  /** Send the headers, then nothing more. */
  hang: boolean;
}

const DRIP_CHUNKS = 20;

/**
 * Writes a 200 JSON body, misbehaving as asked. Content-Length always announces
 * the whole body, so a client can tell a cut-short body from a complete one.
 */
export function writeFaultyBody(res: ServerResponse, body: Buffer, faults: BodyFaults, timers: Timers): void {
  res.writeHead(200, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(body.length),
  });
  if (faults.hang) {
    // The response stays open until the client gives up or the simulator closes.
    res.flushHeaders();
    return;
  }
  const length = faults.truncate ? Math.floor(body.length / 2) : body.length;
  const finish = () => {
    if (faults.truncate) res.socket?.destroy();
    else res.end();
  };
  if (faults.slowMs <= 0) {
    res.write(body.subarray(0, length), finish);
    return;
  }
  const chunks = Math.max(1, Math.min(DRIP_CHUNKS, length));
  const size = Math.ceil(length / chunks);
  const gap = faults.slowMs / chunks;
  res.flushHeaders();
  const drip = (offset: number) => {
    if (res.destroyed) return;
    if (offset >= length) return finish();
    res.write(body.subarray(offset, Math.min(length, offset + size)));
    timers.later(gap, () => drip(offset + size));
  };
  timers.later(gap, () => drip(0));
}
