import { decodeUtf8, NOT_UTF8, quarantineForm } from '../api/utf8.js';
import { readEnvelope } from '../feed/envelope.js';
import type { Logger } from '../logger.js';
import { inSpan, SpanKind } from '../tracing/tracing.js';
import { type DeliveryStoreOptions, deliveryStore, type StoreAnswer } from './delivery-store.js';
import { DEFAULT_TOLERANCE_SEC, type SignatureCheck } from './signature.js';
import { type DeliveryHeaders, type WebhookScheme, webhookScheme } from './webhook-scheme.js';

/** What the receiver answers one delivery: a status and a small JSON body. */
export interface DeliveryAnswer extends StoreAnswer {
  /** With a 401: why the signature was refused (for the metrics; not sent). */
  rejected?: Exclude<SignatureCheck, 'valid'>;
}

export interface DeliveryHandlerOptions extends DeliveryStoreOptions {
  /** WEBHOOK_SECRET values; a signature made with any one of them is accepted (rotation). */
  secrets: readonly string[];
  /** WEBHOOK_SCHEME over these secrets: how deliveries are signed. Default `service`. */
  scheme?: WebhookScheme;
  /**
   * FEED_TYPES; events of other types are acknowledged (200) and not stored, as the
   * feed drops them. `webhook.test` is always stored. Default null: every type.
   */
  types?: readonly string[] | null;
  /** Seconds the signature's `t` may differ from now, either way. Default 300. */
  toleranceSec?: number;
  /** Now, in unix seconds. Default the system clock. */
  now?: () => number;
  logger: Logger;
}

/** Verifies, checks and stores one delivery (its raw bytes and request headers); never throws. */
export type DeliveryHandler = (raw: Buffer, headers: DeliveryHeaders) => Promise<DeliveryAnswer>;

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
  const { store, quarantine } = deliveryStore(opts, log);

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
    if (wanted && !wanted.has(event.type)) {
      log.debug(
        { id: event.id, type: event.type },
        'event type outside FEED_TYPES; acknowledged, not stored',
      );
      return { status: 200, body: { received: true, id: event.id, stored: false, ignored: 'type' } };
    }
    return store(event);
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
