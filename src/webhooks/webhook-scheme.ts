import { ConfigError } from '../errors.js';
import {
  checkWebhookSignature,
  type HeaderRefusal,
  headerRefusal,
  SIGNATURE_HEADER,
  type SignatureCheck,
  type VerifyOptions,
} from './signature.js';
import {
  checkStandardSignature,
  type StandardHeaders,
  standardHeaderRefusal,
  standardMessageId,
  standardSecretKey,
} from './standard-signature.js';

/** WEBHOOK_SCHEME: how deliveries are signed. */
export type WebhookSchemeName = 'service' | 'standard';

/** A request's headers, lower-case names, as node:http has them. */
export type DeliveryHeaders = StandardHeaders;

/**
 * How deliveries are signed, chosen once from WEBHOOK_SCHEME with its secrets bound in:
 * the receiver asks it, never the setting.
 */
export interface WebhookScheme {
  readonly name: WebhookSchemeName;
  /** Why these headers can never verify, whatever the body (so it is not read), or null. */
  refusal(headers: DeliveryHeaders, opts: VerifyOptions): HeaderRefusal | null;
  /** The signature of these raw bytes under any of the secrets. Never throws. */
  check(rawBody: Buffer, headers: DeliveryHeaders, opts: VerifyOptions): SignatureCheck;
  /** The delivery's own id, the event's id when its body carries none (Standard Webhooks only). */
  deliveryId(headers: DeliveryHeaders): string | undefined;
}

/** The single `Service-Signature` header; a repeated one is read joined, as before. */
function serviceHeader(headers: DeliveryHeaders): string | undefined {
  const value = headers[SIGNATURE_HEADER];
  return typeof value === 'string' || value === undefined ? value : value.join(',');
}

/**
 * The scheme of WEBHOOK_SCHEME over WEBHOOK_SECRET's values. A `standard` secret that is
 * no `whsec_<base64>` key stops the program at start (exit 2), naming which one by its
 * place in the list, never by its value.
 */
export function webhookScheme(name: WebhookSchemeName, secrets: readonly string[]): WebhookScheme {
  if (name === 'service') {
    return {
      name,
      refusal: (headers, opts) => headerRefusal(serviceHeader(headers), opts),
      check: (raw, headers, opts) => checkWebhookSignature(raw, serviceHeader(headers), secrets, opts),
      deliveryId: () => undefined,
    };
  }
  const keys = secrets.map((secret, i) => {
    const key = standardSecretKey(secret);
    if (key === null) {
      throw new ConfigError(
        `WEBHOOK_SECRET: value ${i + 1} of ${secrets.length} is not a whsec_<base64> key (WEBHOOK_SCHEME=standard)`,
      );
    }
    return key;
  });
  return {
    name,
    refusal: (headers, opts) => standardHeaderRefusal(headers, opts),
    check: (raw, headers, opts) => checkStandardSignature(raw, headers, keys, opts),
    deliveryId: standardMessageId,
  };
}
