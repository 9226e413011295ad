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
  /** A synthetic backlog of N events at the start of every account's feed, generated on the fly. Default 0. */
  backlog?: number;
  /** The most accounts (one per key) it makes; a new key past it gets 403 `too_many_accounts`. Default 1000. */
  maxAccounts?: number;
  /**
   * The key of the default account: the one that `/_sim` calls naming no account,
   * and the in-process `setBacklog` / `emitContactEvent`, act on. Default
   * `<keyPrefix or "sim">_test_local`.
   */
  defaultKey?: string;
  /**
   * Requests a second each account may make over every /api endpoint, sends included;
   * answers state it in RateLimit-* headers, and a request past it is a 429 with
   * Retry-After. Default: no budget.
   */
  rateLimit?: number;
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
  /**
   * Admit clients from any address to the dashboard and `/_sim` (Host and Origin must
   * still name this machine). Default false: loopback clients only. For a container
   * whose port is published on the host's loopback; anyone who reaches the port can
   * then read the emails sent and change the faults.
   */
  trustNetwork?: boolean;
  /**
   * How webhook deliveries are signed: `service` (`Service-Signature`, the default) or
   * `standard` (Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature`,
   * the message id being the event id, the same over retries).
   */
  webhookScheme?: 'service' | 'standard';
  /** With `standard`: bodies without their `id`, as Resend sends them (the id is in `webhook-id`). Default false. */
  webhookBodyWithoutId?: boolean;
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
  /** /api requests answered 429 because their account's budget (`rateLimit`) was spent. */
  rate_limited: number;
  /** Events in the feed, backlog included, summed over the accounts. */
  events: number;
  /** The same per account, by account id (`acct_…`; an account exists once its key was used). */
  accounts: Record<string, AccountStats>;
}

export interface AccountStats {
  /** `sim_test_…cdef`: the key itself is never shown. */
  key_hint: string;
  /** The account of `defaultKey`. */
  default: boolean;
  emails_sent: number;
  /** `/api` requests made with this account's key. */
  requests: Record<string, Record<string, number>>;
  webhook_deliveries: { attempted: number; succeeded: number; failed: number };
  /** Its requests answered 429 because its budget was spent. */
  rate_limited: number;
  events: number;
  webhooks: number;
}

/** One account, in process. */
export interface SimulatorAccount {
  /** `acct_…`, as in the stats and on the dashboard. */
  readonly id: string;
  stats(): AccountStats;
  /** Starts this account's feed over with a synthetic backlog of n events; only while it has no real event yet. */
  setBacklog(n: number): void;
  /** Fault knobs for this account's requests alone, over the simulator-wide ones. */
  setFaults(f: Partial<Faults>): void;
  emitContactEvent(type: 'contact.subscribed' | 'contact.unsubscribed', email: string): ServiceEvent;
}

export interface Simulator {
  /** `http://127.0.0.1:<port>/api` */
  readonly baseUrl: string;
  /** `http://127.0.0.1:<port>` */
  readonly origin: string;
  readonly port: number;
  /** The key of the default account. */
  readonly defaultKey: string;
  stats(): SimulatorStats;
  /** Simulator-wide fault knobs (an account's own knobs win over them). */
  setFaults(f: Partial<Faults>): void;
  /** Starts the default account's feed over with a synthetic backlog of n events; only while it has no real event yet. */
  setBacklog(n: number): void;
  /** The account of this key (made now if new); a RangeError for a key the simulator refuses. */
  account(key: string): SimulatorAccount;
  /** Appends a contact event to the default account's feed. */
  emitContactEvent(type: 'contact.subscribed' | 'contact.unsubscribed', email: string): ServiceEvent;
  /** Stops pending webhook retries and the server. */
  close(): Promise<void>;
}
