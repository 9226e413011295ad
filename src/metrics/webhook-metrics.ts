import { Counter, Histogram, Registry } from 'prom-client';
import type { Applier } from '../store/applier.js';
import { publishMetrics } from './publish-metrics.js';

/** Why the receiver refused a request before it reached the delivery handler: each a label value of its own. */
export type RefusalReason =
  | 'bad_request'
  | 'headers_too_large'
  | 'timeout'
  | 'slow_body'
  | 'connections'
  | 'busy'
  | 'evicted';
const REFUSAL_REASONS: readonly RefusalReason[] = [
  'bad_request',
  'headers_too_large',
  'timeout',
  'slow_body',
  'connections',
  'busy',
  'evicted',
];

/** The Prometheus metrics of `serve-webhooks` (names in docs/DEPLOYMENT.md). */
export interface WebhookMetrics {
  readonly registry: Registry;
  /**
   * Counts one answer to POST /webhooks, whatever layer gave it (413 and 405 included),
   * except a refusal for load before the signature could be checked (onRefused counts it).
   */
  onAnswered(status: number): void;
  /** The handler (webhooks/receiver.ts's DeliveryHandler), counting why signatures were refused. */
  countRejections<A extends RefusableAnswer>(handle: Handler<A>): Handler<A>;
  /** The applier, timing each transaction (commit latency) and counting the conflicts it recorded. */
  timeCommits(applier: Applier): Applier;
  /** Counts jobs the receiver's own outbox relay handed to BullMQ. */
  onPublished(queue: string, count: number): void;
  /** One job's delay from commit to publication. */
  onPublishDelay(seconds: number): void;
  /** Counts a request refused before the handler saw it (see RefusalReason). */
  onRefused(reason: RefusalReason): void;
}

/**
 * Signature refusals, by reason: every label set exists from the start, at 0. A reason
 * webhooks/signature.ts adds fails to compile where the receiver's handler is passed to
 * countRejections until it is listed here.
 */
const REASONS = ['missing', 'malformed', 'stale', 'mismatch'] as const;

/** Why a signature was refused: the label `reason`. */
export type SignatureRefusal = (typeof REASONS)[number];

/** A delivery's answer as far as the metrics read it. */
export interface RefusableAnswer {
  rejected?: SignatureRefusal;
}

/**
 * A delivery handler. The receiver's own types sit above the metrics (webhooks/ imports
 * metrics/), so this names only the shape the metrics wrap.
 */
export type Handler<A> = (
  raw: Buffer,
  headers: Readonly<Record<string, string | readonly string[] | undefined>>,
) => Promise<A>;

/**
 * The receiver's own registry: requests by HTTP answer, signature failures by reason,
 * the latency of the store's transaction, and the jobs its relay published (the same
 * metric as the worker's, so a dashboard sums both). Each of its own carries the
 * `source` the receiver stores under, so one dashboard variable selects the feed's and
 * the receiver's series. `queues` are the configured queue names.
 */
export function createWebhookMetrics(source: string, queues: readonly string[]): WebhookMetrics {
  const registry = new Registry();
  const requests = new Counter({
    name: 'feedsync_webhook_requests_total',
    help:
      'Deliveries answered at POST /webhooks, by HTTP status; not the requests refused for load before their ' +
      'signature could be checked (feedsync_webhook_refused_total, reason busy or evicted).',
    labelNames: ['source', 'status'],
    registers: [registry],
  });
  const rejected = new Counter({
    name: 'feedsync_webhook_signature_failures_total',
    help: 'Deliveries refused for their signature (401), by reason: missing, malformed, stale, mismatch.',
    labelNames: ['source', 'reason'],
    registers: [registry],
  });
  const commits = new Histogram({
    name: 'feedsync_webhook_commit_duration_seconds',
    help: "Time of the store's transaction for one delivery (the wait before a 200).",
    labelNames: ['source'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: [registry],
  });
  // The worker's metric too, so a dashboard sums the feed's and the receiver's.
  const conflicts = new Counter({
    name: 'feedsync_events_conflict_total',
    help: 'Versions of stored event ids that came back with other content (the first kept; the newest other one in the conflicts table).',
    labelNames: ['source'],
    registers: [registry],
  });
  conflicts.inc({ source }, 0);
  const publishing = publishMetrics(registry);
  const refusedEarly = new Counter({
    name: 'feedsync_webhook_refused_total',
    help:
      'Requests refused before any check of the delivery, by reason: bad_request (400), headers_too_large (431), ' +
      'timeout (408: headers not in time), slow_body (408: a body behind its minimum rate), ' +
      'connections (the oldest connection without a request in hand, closed past the cap), busy (503: body buffer budget full), ' +
      'evicted (503: a body arriving for over a second, its room given to bytes that found the budget full).',
    labelNames: ['source', 'reason'],
    registers: [registry],
  });
  for (const reason of REFUSAL_REASONS) refusedEarly.inc({ source, reason }, 0);
  for (const queue of queues) publishing.onPublished(queue, 0);
  // Zero series from the start: increase() cannot see a series born at 1, so the first
  // quarantined delivery (400), refusal (401) or outage (503) would go unseen by the alerts.
  for (const reason of REASONS) rejected.inc({ source, reason }, 0);
  for (const status of ['200', '400', '401', '503']) requests.inc({ source, status }, 0);

  return {
    registry,
    ...publishing,
    onRefused: (reason) => refusedEarly.inc({ source, reason }),
    onAnswered: (status) => requests.inc({ source, status: String(status) }),
    countRejections: (handle) => async (raw, headers) => {
      const answer = await handle(raw, headers);
      if (answer.rejected) rejected.inc({ source, reason: answer.rejected });
      return answer;
    },
    timeCommits: (applier) => ({
      async apply(batch) {
        const end = commits.startTimer({ source });
        try {
          const result = await applier.apply(batch);
          if (result.conflicts > 0) conflicts.inc({ source }, result.conflicts);
          return result;
        } finally {
          end();
        }
      },
    }),
  };
}
