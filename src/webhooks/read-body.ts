import type { IncomingMessage } from 'node:http';
import type { BodyBudget } from './body-budget.js';

/**
 * How fast a body must arrive, as Apache's mod_reqtimeout `body=10,MinRate=1000` with a
 * ceiling: a body has `graceMs` from the end of its headers, every byte received
 * extends that by 1/`minBytesPerSec` of a second, and none has more than `maxMs`. A
 * deadline moves only with bytes actually received, so a sender that trickles is cut
 * within seconds and a fast one never is.
 */
export interface BodyPace {
  /** Time every body has, in ms, whatever its rate. */
  graceMs: number;
  /** Bytes a second that keep extending the deadline past the grace. */
  minBytesPerSec: number;
  /** The longest a body may take, in ms, however fast it came. */
  maxMs: number;
}

/** 10 s, then 1,000 bytes a second, 30 s at most: a 256 KiB body needs about 9 KB/s. */
export const DEFAULT_BODY_PACE: BodyPace = { graceMs: 10_000, minBytesPerSec: 1000, maxMs: 30_000 };

/**
 * 'too-large': over the limit (declared or counted); 'busy': the budget has no room
 * for the bytes that came; 'evicted': the body arrived too long and its room went to
 * another's bytes; 'slow': the body fell behind its pace; 'aborted': the client went
 * away or sent garbage.
 */
export type BodyRefusal = 'too-large' | 'busy' | 'evicted' | 'slow' | 'aborted';

export type BodyResult =
  /** `release` gives the body's room in the budget back: call it once done with `body`. */
  { ok: true; body: Buffer; release: () => void } | { ok: false; reason: BodyRefusal };

export interface ReadBodyOptions {
  /** The largest body, in bytes: a Content-Length over it is refused before a byte is read. */
  limit: number;
  /**
   * Where the body's bytes are reserved as they arrive. On success the body keeps its
   * room until the caller releases it; otherwise it is released here.
   */
  budget: BodyBudget;
  /** Its sender's last delivery failed its signature: read last (body-budget.ts). */
  suspect?: boolean;
  pace: BodyPace;
}

/**
 * Reads a request body as raw bytes. Stops reading at once (the caller answers and
 * closes the connection) on a body past the limit, one the budget has no room for (or
 * takes back), or one that falls behind its pace.
 */
export function readBody(req: IncomingMessage, opts: ReadBodyOptions): Promise<BodyResult> {
  const { limit, budget, pace } = opts;
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    return Promise.resolve({ ok: false, reason: 'too-large' });
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    /** Bytes received, all of them reserved in the budget. */
    let size = 0;
    let done = false;
    const started = performance.now();
    const deadline = (): number =>
      started + Math.min(pace.graceMs + (size * 1000) / pace.minBytesPerSec, pace.maxMs);
    // One timer a body, set again at the deadline the bytes received meanwhile have moved.
    const check = (): void => {
      const left = deadline() - performance.now();
      if (left <= 0) stop('slow');
      else timer = setTimeout(check, left);
    };
    let timer = setTimeout(check, pace.graceMs);
    const finish = (result: BodyResult): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
      if (result.ok) account.complete();
      else account.release();
      resolve(result);
    };
    const stop = (reason: Exclude<BodyRefusal, 'aborted'>): void => {
      req.pause();
      finish({ ok: false, reason });
    };
    const account = budget.open(() => stop('evicted'), opts.suspect ?? false);
    const onData = (chunk: Buffer): void => {
      if (size + chunk.length > limit) stop('too-large');
      else if (!account.reserve(chunk.length)) stop('busy');
      else {
        size += chunk.length;
        chunks.push(chunk);
      }
    };
    const onEnd = (): void =>
      finish({ ok: true, body: Buffer.concat(chunks, size), release: account.release });
    const onError = (): void => finish({ ok: false, reason: 'aborted' });
    // 'close' before 'end' means the body never completed.
    const onClose = (): void => finish({ ok: false, reason: 'aborted' });
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}
