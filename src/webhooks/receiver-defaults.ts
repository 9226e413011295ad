import { CONFIG_DEFAULTS } from '../config/config-defaults.js';

/** The receiver's defaults, each in one place: ReceiverOptions and ReceiverServerOptions name them. */
export const RECEIVER_DEFAULTS = Object.freeze({
  /** Every interface, as a pod needs: WEBHOOK_HOST's default. */
  host: CONFIG_DEFAULTS.WEBHOOK_HOST,
  /** Milliseconds, 10 s: a store call that takes longer is answered 503, and the service retries. */
  storeTimeoutMs: 10_000,
  /** Milliseconds, 20 s: how long close() waits for requests in flight before cutting them. */
  closeTimeoutMs: 20_000,
  /** Milliseconds, 10 s: the longest a request's headers may take to arrive. */
  headersTimeoutMs: 10_000,
  /** Open connections at most; past it the oldest one without a request in hand is closed. */
  maxConnections: 1024,
  /** Bytes, 32 MiB: request bodies buffered at once, 128 bodies of the default WEBHOOK_MAX_BODY_BYTES. */
  maxBufferedBytes: 32 * 1024 * 1024,
  /** Milliseconds, 1 s: a body arriving this long gives up its room when the budget is full. */
  evictAfterMs: 1_000,
});
