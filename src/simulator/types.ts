import type { Logger } from 'pino';
import type { ServiceEvent } from '../api/types.js';

/** How the simulator starts. Every field is optional. */
export interface SimulatorOptions {
  /** TCP port. Default 4010; 0 picks any free port. */
  port?: number;
  /** Interface to listen on. Default `127.0.0.1`. */
  host?: string;
  /** Fixes the `<prefix>` of accepted keys (`<prefix>_test_…`); default any run of lowercase letters. */
  keyPrefix?: string;
  /** Multiplies the webhook retry gaps (about a day in all). Default 1; 0.001 in tests. */
  timeScale?: number;
  /** A synthetic backlog of N events at the start of the feed, generated on the fly. Default 0. */
  backlog?: number;
  /** Fault knobs at start; change them later with `setFaults` or `POST /_sim/faults`. */
  faults?: Partial<Faults>;
  /** Requests are logged at debug. Default a silent logger. */
  logger?: Logger;
  /** Clock in ms, used for `created_at` and webhook signatures. Default `Date.now`. */
  now?: () => number;
  /** Source of randomness for the fault rates, in [0, 1). Default `Math.random`. */
  random?: () => number;
  /** Timeout of one webhook delivery attempt, in ms. Default 10000. */
  deliveryTimeoutMs?: number;
}

/** Fault knobs. Rates are shares between 0 and 1, drawn per request. */
export interface Faults {
  /** Milliseconds added before every /api response. */
  latencyMs: number;
  /** Share of /api requests answered 429 with Retry-After. */
  rate429: number;
  /** The Retry-After value, in seconds, sent with a 429. Default 1. */
  retryAfterSec: number;
  /** Share of /api requests answered 503. */
  rate5xx: number;
  /** Share of feed pages that start by repeating the last few events of the previous page. */
  duplicateRate: number;
  /** The body of /events is dripped out over this many ms. */
  slowBodyMs: number;
  /** Share of /events responses whose body is cut short (Content-Length says more, then the socket closes). */
  truncateRate: number;
  /** Share of /events responses that send headers and then never finish the body. */
  hangRate: number;
}

export interface SimulatorStats {
  /** Messages accepted by `POST /emails` (an idempotent replay is not a send). */
  emails_sent: number;
  /** Route (`GET /api/events`) -> HTTP status -> count. */
  requests: Record<string, Record<string, number>>;
  /** Counted per HTTP attempt: a delivery retried twice and then accepted is 3 attempted, 2 failed, 1 succeeded. */
  webhook_deliveries: { attempted: number; succeeded: number; failed: number };
  /** Events in the feed, backlog included. */
  events: number;
}

export interface Simulator {
  /** `http://127.0.0.1:<port>/api` */
  readonly baseUrl: string;
  /** `http://127.0.0.1:<port>` */
  readonly origin: string;
  readonly port: number;
  stats(): SimulatorStats;
  setFaults(f: Partial<Faults>): void;
  /** Replaces the synthetic backlog; only while no real event exists yet. */
  setBacklog(n: number): void;
  emitContactEvent(type: 'contact.subscribed' | 'contact.unsubscribed', email: string): ServiceEvent;
  /** Stops pending webhook retries and the server. */
  close(): Promise<void>;
}
