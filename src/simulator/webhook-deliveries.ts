import type { Logger } from 'pino';
import { Agent, request } from 'undici';
import type { ServiceEvent } from '../api/types.js';
import { SIGNATURE_HEADER, signWebhookPayload } from '../webhooks/signature.js';
import { signStandardWebhook } from '../webhooks/standard-signature.js';
import { SimError } from './errors.js';
import type { Timers } from './timers.js';
import type { Registration } from './webhooks.js';

/** Gaps before each attempt, about a day in all; multiplied by the time scale. */
export const RETRY_SCHEDULE_MS = [
  0,
  5_000,
  5 * 60_000,
  30 * 60_000,
  2 * 3_600_000,
  5 * 3_600_000,
  10 * 3_600_000,
  10 * 3_600_000,
] as const;
/** Deliveries kept per webhook for listing and resending. */
const DELIVERIES_KEPT = 50;

export interface DeliveryAttempt {
  at: string;
  /** The receiver's HTTP status; null when no answer came. */
  status: number | null;
  error?: string;
  duration_ms: number;
}

export interface DeliveryView {
  id: string;
  webhook_id: string;
  event_id: string;
  event_type: string;
  status: 'pending' | 'succeeded' | 'failed';
  attempts: DeliveryAttempt[];
  next_attempt_at: string | null;
  created_at: string;
}

interface Delivery extends DeliveryView {
  event: ServiceEvent;
  reg: Registration;
}

export interface DelivererOptions {
  timeScale: number;
  timeoutMs: number;
  now: () => number;
  timers: Timers;
  /** Where attempts are counted (the simulator's Stats); only this much, so stats.ts, which reads accounts, is not imported back. */
  stats: { delivery(account: string, ok: boolean): void };
  logger: Logger;
  /** How deliveries are signed (SimulatorOptions.webhookScheme). */
  scheme: 'service' | 'standard';
  /** Bodies without `id` (SimulatorOptions.webhookBodyWithoutId); only with `standard`. */
  bodyWithoutId: boolean;
}

/**
 * Posts events to registered URLs, signed with the registration's secret, and
 * retries non-2xx answers and network errors on RETRY_SCHEDULE_MS.
 */
export class Deliverer {
  private readonly byWebhook = new Map<string, Delivery[]>();
  private readonly inFlight = new Set<AbortController>();
  private readonly deleted = new Set<string>();
  private readonly agent = new Agent({ keepAliveTimeout: 1_000 });
  private seq = 0;
  private closed = false;

  constructor(private readonly opts: DelivererOptions) {}

  /** Starts delivering; the promise settles after the first attempt. */
  deliver(reg: Registration, event: ServiceEvent): { delivery: DeliveryView; firstAttempt: Promise<void> } {
    this.seq += 1;
    const delivery: Delivery = {
      id: `dlv_${String(this.seq).padStart(9, '0')}`,
      webhook_id: reg.id,
      event_id: event.id,
      event_type: event.type,
      status: 'pending',
      attempts: [],
      next_attempt_at: new Date(this.opts.now()).toISOString(),
      created_at: new Date(this.opts.now()).toISOString(),
      event,
      reg,
    };
    const kept = this.byWebhook.get(reg.id) ?? [];
    kept.push(delivery);
    if (kept.length > DELIVERIES_KEPT) kept.shift();
    this.byWebhook.set(reg.id, kept);
    return { delivery: view(delivery), firstAttempt: this.attempt(delivery) };
  }

  /** The last deliveries of a webhook, newest first. */
  list(webhookId: string): DeliveryView[] {
    return (this.byWebhook.get(webhookId) ?? []).map(view).reverse();
  }

  /** Delivers the same event again, as a new delivery with its own retries. */
  resend(webhookId: string, deliveryId: string): { delivery: DeliveryView; firstAttempt: Promise<void> } {
    const found = this.byWebhook.get(webhookId)?.find((d) => d.id === deliveryId);
    if (!found)
      throw new SimError(404, 'delivery_not_found', `no delivery ${deliveryId.slice(0, 64)} on this webhook`);
    return this.deliver(found.reg, found.event);
  }

  /** A deleted webhook gets no more attempts. */
  forget(webhookId: string): void {
    this.deleted.add(webhookId);
    this.byWebhook.delete(webhookId);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const controller of this.inFlight) controller.abort();
    await this.agent.destroy();
  }

  /** The body posted and the headers that sign it, in the simulator's scheme. */
  private signed(delivery: Delivery): { body: string; signed: Record<string, string> } {
    const t = Math.floor(this.opts.now() / 1000);
    const secret = delivery.reg.signing_secret;
    if (this.opts.scheme === 'service') {
      const body = JSON.stringify(delivery.event);
      return { body, signed: { [SIGNATURE_HEADER]: signWebhookPayload(body, secret, t) } };
    }
    const { id, ...rest } = delivery.event;
    const body = JSON.stringify(this.opts.bodyWithoutId ? rest : delivery.event);
    // The message id is the event's, the same over every retry and resend: the receiver deduplicates by it.
    return {
      body,
      signed: {
        'webhook-id': id,
        'webhook-timestamp': String(t),
        'webhook-signature': signStandardWebhook(body, secret, id, t),
      },
    };
  }

  private async attempt(delivery: Delivery): Promise<void> {
    if (this.closed || this.deleted.has(delivery.webhook_id)) return;
    const { body, signed } = this.signed(delivery);
    const started = Date.now();
    const controller = new AbortController();
    this.inFlight.add(controller);
    let status: number | null = null;
    let error: string | undefined;
    try {
      const res = await request(delivery.reg.url, {
        method: 'POST',
        body,
        headers: {
          'content-type': 'application/json',
          ...signed,
          'user-agent': 'feedsync-simulator',
        },
        dispatcher: this.agent,
        signal: controller.signal,
        headersTimeout: this.opts.timeoutMs,
        bodyTimeout: this.opts.timeoutMs,
      });
      status = res.statusCode;
      await res.body.dump();
    } catch (err) {
      error = (err as { code?: string }).code ?? (err as Error).message ?? 'error';
    } finally {
      this.inFlight.delete(controller);
    }
    if (this.closed) return;

    const ok = status !== null && status >= 200 && status < 300;
    delivery.attempts.push({
      at: new Date(this.opts.now()).toISOString(),
      status,
      ...(error === undefined ? {} : { error }),
      duration_ms: Date.now() - started,
    });
    this.opts.stats.delivery(delivery.reg.account_id, ok);
    const log = {
      webhook: delivery.webhook_id,
      delivery: delivery.id,
      event: delivery.event_id,
      status,
      error,
    };
    this.opts.logger.debug(log, ok ? 'webhook delivered' : 'webhook delivery failed');

    const gap = RETRY_SCHEDULE_MS[delivery.attempts.length];
    if (ok || gap === undefined) {
      delivery.status = ok ? 'succeeded' : 'failed';
      delivery.next_attempt_at = null;
      return;
    }
    const wait = gap * this.opts.timeScale;
    delivery.next_attempt_at = new Date(this.opts.now() + wait).toISOString();
    this.opts.timers.later(wait, () => void this.attempt(delivery));
  }
}

function view(d: Delivery): DeliveryView {
  return {
    id: d.id,
    webhook_id: d.webhook_id,
    event_id: d.event_id,
    event_type: d.event_type,
    status: d.status,
    attempts: d.attempts.map((a) => ({ ...a })),
    next_attempt_at: d.next_attempt_at,
    created_at: d.created_at,
  };
}
