import type { ServiceEvent } from '../api/types.js';
import { withDeadline } from '../deadline.js';
import type { Logger } from '../logger.js';
import type { Applier, ApplyResult } from '../store/applier.js';
import { RECEIVER_DEFAULTS } from './receiver-defaults.js';

/** What the store side answers: the receiver's answer but for a refused signature. */
export interface StoreAnswer {
  status: number;
  body: Record<string, unknown>;
  /** Sent as Retry-After with a 503, in seconds. */
  retryAfterSec?: number;
}

export interface DeliveryStoreOptions {
  /** FEED_SOURCE: the same source as the feed, so an event that arrives both ways is stored once. */
  source: string;
  applier: Applier;
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
}

/** The receiver's store side: a verified delivery's event stored, or its body quarantined, and the answer. */
export interface DeliveryStore {
  /** Stores one event in an applier transaction: 200 only after the commit. */
  store(event: ServiceEvent): Promise<StoreAnswer>;
  /**
   * Keeps a signed body that is no storable event (its text: `raw`, in quarantineForm
   * when it is not UTF-8), then answers 400 (503 when even that fails).
   */
  quarantine(raw: string, bytes: number, reason: string, error: string): Promise<StoreAnswer>;
}

const STORE_UNAVAILABLE: StoreAnswer = {
  status: 503,
  body: { error: 'store_unavailable', message: 'the store is unavailable; retry later' },
  retryAfterSec: 30,
};

export function deliveryStore(opts: DeliveryStoreOptions, log: Logger): DeliveryStore {
  const timeoutMs = opts.storeTimeoutMs ?? RECEIVER_DEFAULTS.storeTimeoutMs;
  const storeLate = () => new Error(`the store did not answer within ${timeoutMs} ms`);

  const apply = async (batch: {
    events: ServiceEvent[];
    quarantine: { raw: string; reason: string }[];
  }): Promise<ApplyResult> => {
    await withDeadline(opts.ready?.() ?? Promise.resolve(), timeoutMs, 'ready', storeLate);
    return withDeadline(
      opts.applier.apply({ source: opts.source, receivedVia: 'webhook', ...batch }),
      timeoutMs,
      'apply',
      storeLate,
    );
  };

  return {
    async quarantine(raw, bytes, reason, error) {
      try {
        await apply({ events: [], quarantine: [{ raw, reason }] });
      } catch (err) {
        log.error({ err }, 'could not quarantine a signed delivery; answering 503');
        return STORE_UNAVAILABLE;
      }
      log.warn({ reason, bytes }, 'signed delivery is not a storable event; quarantined');
      return { status: 400, body: { error, message: reason, quarantined: true } };
    },

    async store(event) {
      const ref = { id: event.id, type: event.type };
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
    },
  };
}
