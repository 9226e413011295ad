import type { IncomingMessage } from 'node:http';

export type BodyResult =
  | { ok: true; body: Buffer }
  /** 'too-large': over the limit (declared or counted); 'aborted': the client went away or sent garbage. */
  | { ok: false; reason: 'too-large' | 'aborted' };

/**
 * Reads a request body as raw bytes, at most `limit` of them. A Content-Length
 * over the limit is refused before a byte is read; a body that grows past it
 * stops being read at once (the caller answers 413 and closes the connection).
 */
export function readBody(req: IncomingMessage, limit: number): Promise<BodyResult> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    return Promise.resolve({ ok: false, reason: 'too-large' });
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (result: BodyResult): void => {
      if (done) return;
      done = true;
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
      resolve(result);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) {
        req.pause();
        finish({ ok: false, reason: 'too-large' });
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => finish({ ok: true, body: Buffer.concat(chunks, size) });
    const onError = (): void => finish({ ok: false, reason: 'aborted' });
    // 'close' before 'end' means the body never completed.
    const onClose = (): void => finish({ ok: false, reason: 'aborted' });
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}
