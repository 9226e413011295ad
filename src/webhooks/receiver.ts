import type { ServiceEvent } from '../api/types.js';
import { decodeUtf8, NOT_UTF8, quarantineForm } from '../api/utf8.js';
import { readEnvelope } from '../feed/envelope.js';
import type { Logger } from '../logger.js';
import type { Applier, ApplyResult } from '../store/applier.js';
import { inSpan, SpanKind } from '../tracing/tracing.js';
import { RECEIVER_DEFAULTS } from './receiver-defaults.js';
import { DEFAULT_TOLERANCE_SEC, type SignatureCheck } from './signature.js';
import { type DeliveryHeaders, type WebhookScheme, webhookScheme } from './webhook-scheme.js';

/** What the receiver answers one delivery: a status and a small JSON body. */
export interface DeliveryAnswer {
  status: number;
  body: Record<string, unknown>;
  /** Sent as Retry-After with a 503, in seconds. */
  retryAfterSec?: number;
  /** With a 401: why the signature was refused (for the metrics; not sent). */
  rejected?: Exclude<SignatureCheck, 'valid'>;
}

export interface DeliveryHandlerOptions {
  /** WEBHOOK_SECRET values; a signature made with any one of them is accepted (rotation). */
  secrets: readonly string[];
  /** WEBHOOK_SCHEME over these secrets: how deliveries are signed. Default `service`. */
  scheme?: WebhookScheme;
  /** FEED_SOURCE: the same source as the feed, so an event that arrives both ways is stored once. */
  source: string;
  applier: Applier;
  /**
   * FEED_TYPES; events of other types are acknowledged (200) and not stored, as the
   * feed drops them. `webhook.test` is always stored. Default null: every type.
   */
  types?: readonly string[] | null;
  /** Seconds the signature's `t` may differ from now, either way. Default 300. */
  toleranceSec?: number;
  /** Now, in unix seconds. Default the system clock. */
  now?: () => number;
  /** Throws while the store cannot take events (schema outdated, Postgres down): answered 503. */
  ready?: () => Promise<void>;
  /**
   * Called after each event stored or found stored (a duplicate), for the relay: it
   * publishes the new outbox row, and reads the outbox on a duplicate, which may be
   * the retry of a delivery whose commit finished after its 503 went out, and whose
   * outbox row nobody has published yet.
   */
  onStored?: (result: ApplyResult) => void;
  /** A store call that takes longer is answered 503 (the service retries). Default: RECEIVER_DEFAULTS.storeTimeoutMs. */
  storeTimeoutMs?: number;
  logger: Logger;
}

/** Verifies, checks and stores one delivery (its raw bytes and request headers); never throws. */
export type DeliveryHandler = (raw: Buffer, headers: DeliveryHeaders) => Promise<DeliveryAnswer>;

const STORE_UNAVAILABLE: DeliveryAnswer = {
  status: 503,
  body: { error: 'store_unavailable', message: 'the store is unavailable; retry later' },
  retryAfterSec: 30,
};

/**
 * The receiver's decisions, apart from HTTP: signature over the raw bytes first
 * (401), then UTF-8 (400), then JSON (400), then the envelope (400), then one applier transaction
 * (200 only after the commit). A signed body that can never be stored (not JSON,
 * not an envelope, or a value Postgres refuses, which the applier quarantines) is
 * kept in quarantine and answered 400: it came from the service, so nothing is
 * dropped silently, and a retry could not help. 503 is left for what a retry can
 * fix: Postgres down or slow, the schema not migrated yet.
 */
export function createDeliveryHandler(opts: DeliveryHandlerOptions): DeliveryHandler {
  const log = opts.logger.child({ module: 'webhooks' });
  const secrets = opts.secrets.filter((s) => s.length > 0);
  if (secrets.length === 0) throw new Error('createDeliveryHandler: at least one secret is required');
  const scheme = opts.scheme ?? webhookScheme('service', secrets);
  const now = opts.now ?? (() => Math.floor(Date.now() / 1000));
  const tolerance = opts.toleranceSec ?? DEFAULT_TOLERANCE_SEC;
  const wanted = opts.types ? new Set([...opts.types, 'webhook.test']) : null;
  const timeoutMs = opts.storeTimeoutMs ?? RECEIVER_DEFAULTS.storeTimeoutMs;

  const apply = async (batch: {
    events: ServiceEvent[];
    quarantine: { raw: string; reason: string }[];
  }): Promise<ApplyResult> => {
    await withTimeout(opts.ready?.() ?? Promise.resolve(), timeoutMs);
    return withTimeout(
      opts.applier.apply({ source: opts.source, receivedVia: 'webhook', ...batch }),
      timeoutMs,
    );
  };

  /**
   * Keeps a signed body that is no storable event (its text: `raw`, in quarantineForm
   * when it is not UTF-8), then answers 400 (503 when even that fails).
   */
  const quarantine = async (
    raw: string,
    bytes: number,
    reason: string,
    error: string,
  ): Promise<DeliveryAnswer> => {
    try {
      await apply({ events: [], quarantine: [{ raw, reason }] });
    } catch (err) {
      log.error({ err }, 'could not quarantine a signed delivery; answering 503');
      return STORE_UNAVAILABLE;
    }
    log.warn({ reason, bytes }, 'signed delivery is not a storable event; quarantined');
    return { status: 400, body: { error, message: reason, quarantined: true } };
  };

  return traced(async (raw, headers) => {
    const check = scheme.check(raw, headers, { now: now(), toleranceSec: tolerance });
    if (check !== 'valid') {
      // The header's value is never logged: it is an HMAC of the body under our secret.
      log.warn({ bytes: raw.length, reason: check }, 'webhook signature rejected');
      return {
        status: 401,
        body: { error: 'invalid_signature', message: 'missing, malformed, stale or wrong signature' },
        rejected: check,
      };
    }

    // Decoded strictly: a body that is not UTF-8 would be stored altered (ids merged, addresses changed).
    const { text, valid } = decodeUtf8(raw);
    if (!valid)
      return quarantine(quarantineForm(text), raw.length, `the body is ${NOT_UTF8}`, 'invalid_encoding');
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return quarantine(text, raw.length, 'the body is not JSON', 'invalid_json');
    }
    const envelope = readEnvelope(withDeliveryId(parsed, scheme.deliveryId(headers)));
    if (!envelope.ok) {
      return quarantine(text, raw.length, `not an event envelope: ${envelope.reason}`, 'not_an_event');
    }
    const { event } = envelope;
    const ref = { id: event.id, type: event.type };

    if (wanted && !wanted.has(event.type)) {
      log.debug(ref, 'event type outside FEED_TYPES; acknowledged, not stored');
      return { status: 200, body: { received: true, id: event.id, stored: false, ignored: 'type' } };
    }

    let result: ApplyResult;
    try {
      result = await apply({ events: [event], quarantine: [] });
    } catch (err) {
      log.error({ err, ...ref }, 'could not store a webhook event; answering 503');
      return STORE_UNAVAILABLE;
    }
    const refused = result.unstorable[0];
    if (refused) {
      // The reason may quote the refused value: it stays in the quarantine table, out of the log.
      log.warn(ref, 'webhook event cannot be stored as such; quarantined');
      return { status: 400, body: { error: 'not_an_event', message: refused.reason, quarantined: true } };
    }
    opts.onStored?.(result);
    const duplicate = result.inserted.length === 0;
    // One line per id however often it comes back changed: the rest are counted (conflicts row, metric).
    if (result.firstConflicts > 0)
      log.warn(ref, 'event id stored before with other content; first kept, conflict recorded');
    else if (result.conflicts > 0) log.debug(ref, 'event id came back with other content again; counted');
    if (result.contactsWithoutEmail > 0)
      log.warn(
        ref,
        'contact event without a usable data.email: stored and enqueued, contact_status and suppressions unchanged',
      );
    log.debug({ ...ref, duplicate }, 'webhook event stored');
    return { status: 200, body: { received: true, id: event.id, stored: true, duplicate } };
  });
}

/**
 * A body without `id` (Resend's, under Standard Webhooks) takes the delivery's own id,
 * which stays the same over the sender's retries: deliveries are deduplicated by it.
 */
function withDeliveryId(parsed: unknown, deliveryId: string | undefined): unknown {
  if (deliveryId === undefined || typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    return parsed;
  return 'id' in parsed ? parsed : { ...parsed, id: deliveryId };
}

/** Each delivery in a span: the signature check's result and the answer; its commit is a child. */
function traced(handle: DeliveryHandler): DeliveryHandler {
  return (raw, headers) =>
    inSpan(
      'webhook delivery',
      { 'http.request.method': 'POST', 'http.request.body.size': raw.length },
      async (span) => {
        const answer = await handle(raw, headers);
        span.setAttributes({
          'http.response.status_code': answer.status,
          'feedsync.webhook.verification': answer.rejected ?? 'valid',
          'feedsync.webhook.stored': answer.body.stored === true,
          'feedsync.webhook.duplicate': answer.body.duplicate === true,
        });
        return answer;
      },
      { kind: SpanKind.SERVER },
    );
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the store did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
