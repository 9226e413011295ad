import { randomUUID } from 'node:crypto';
import type { AccountBudget, BudgetLimits } from '../budget/account-budget.js';
import type { RequestBudgets } from '../budget/request-budgets.js';
import { checkBaseUrl } from '../config/base-url.js';
import { CONFIG_DEFAULTS } from '../config/config-defaults.js';
import { ConfigError, PageError } from '../errors.js';
import { inSpan, SpanKind } from '../tracing/tracing.js';
import { type BodyRoom, createTransport, type HttpResponse, type RequestFn } from './http.js';
import { pacedRequest } from './paced-request.js';
import { rawItems } from './raw-items.js';
import { type RetryDeps, type RetryPolicy, withRetries } from './retry.js';
import type {
  CreatedWebhook,
  CreateWebhookRequest,
  EventsQuery,
  RawEventsPage,
  SendEmailRequest,
  SendEmailResponse,
  Webhook,
} from './types.js';
import { decodeUtf8 } from './utf8.js';

export interface ServiceClientOptions {
  /** Ends in `/api`; https except for loopback hosts. */
  baseUrl: string;
  apiKey: string;
  /** Connect, headers and body timeout of one request. Default: CONFIG_DEFAULTS.FEED_TIMEOUT_MS. */
  timeoutMs?: number;
  /** Larger responses are refused. Default: CONFIG_DEFAULTS.FEED_MAX_RESPONSE_BYTES, the configuration's own. */
  maxResponseBytes?: number;
  /** Retries of 429, 5xx and network errors. Default: CONFIG_DEFAULTS.FEED_MAX_RETRIES and FEED_MAX_RETRY_WAIT_MS. */
  retry?: RetryPolicy;
  /** Clock, sleep, jitter and a retry hook, for tests and metrics. */
  retryDeps?: RetryDeps;
  /** Replaces the undici transport (tests). */
  request?: RequestFn;
  /**
   * Paces every request to the key's account (src/budget/): FEED_RATE_SHARE of the
   * budget the service states, at most FEED_MAX_REQUESTS_PER_SECOND. Default: unpaced.
   */
  budget?: { budgets: RequestBudgets; limits: BudgetLimits };
}

/**
 * A typed client for every endpoint of the service. Reads retry on 429, 5xx and
 * network errors; a send retries too, always with the same Idempotency-Key; the
 * other writes retry only on 429, which the service did not act on.
 */
export class ServiceClient {
  readonly #request: RequestFn;
  readonly #close: () => Promise<void>;
  readonly #retry: RetryPolicy;
  readonly #deps: RetryDeps;
  readonly #budget: AccountBudget | undefined;

  constructor(opts: ServiceClientOptions) {
    const problem = checkBaseUrl(opts.baseUrl);
    if (problem) throw new ConfigError(`base URL ${problem}`, 'BAD_BASE_URL');
    if (!opts.apiKey) throw new ConfigError('an API key is required', 'NO_API_KEY');
    const budgets = opts.budget?.budgets;
    const budget = opts.budget ? opts.budget.budgets.forKey(opts.apiKey, opts.budget.limits) : undefined;
    let request: RequestFn;
    if (opts.request) {
      request = opts.request;
      this.#close = async () => {};
    } else {
      const transport = createTransport({
        baseUrl: opts.baseUrl,
        apiKey: opts.apiKey,
        timeoutMs: opts.timeoutMs ?? CONFIG_DEFAULTS.FEED_TIMEOUT_MS,
        maxResponseBytes: opts.maxResponseBytes ?? CONFIG_DEFAULTS.FEED_MAX_RESPONSE_BYTES,
        ...(opts.retryDeps?.now ? { now: opts.retryDeps.now } : {}),
        ...(budgets && budget
          ? {
              onHeaders: (status: number, headers: HttpResponse['headers']) =>
                budgets.answered(budget, status, headers),
            }
          : {}),
      });
      request = transport.request;
      this.#close = transport.close;
    }
    this.#request = budgets && budget ? pacedRequest(request, budgets, budget, !opts.request) : request;
    this.#budget = budget;
    this.#retry = opts.retry ?? {
      maxRetries: CONFIG_DEFAULTS.FEED_MAX_RETRIES,
      maxRetryWaitMs: CONFIG_DEFAULTS.FEED_MAX_RETRY_WAIT_MS,
    };
    this.#deps = opts.retryDeps ?? {};
  }

  /**
   * Sends one email. The Idempotency-Key is generated when none is given, and the
   * same key goes with every retry, so the service sends the message once.
   */
  sendEmail(
    email: SendEmailRequest,
    opts: { idempotencyKey?: string; signal?: AbortSignal } = {},
  ): Promise<SendEmailResponse & { idempotencyKey: string; replayed: boolean }> {
    // Counts only: never the addresses, the subject or the key.
    const attributes = {
      'feedsync.send.recipients': email.to.length,
      'feedsync.send.key_given': opts.idempotencyKey !== undefined,
    };
    return inSpan(
      'send',
      attributes,
      async (span) => {
        const sent = await this.#sendEmail(email, opts);
        span.setAttribute('feedsync.send.replayed', sent.replayed);
        return sent;
      },
      { kind: SpanKind.CLIENT },
    );
  }

  async #sendEmail(
    email: SendEmailRequest,
    opts: { idempotencyKey?: string; signal?: AbortSignal },
  ): Promise<SendEmailResponse & { idempotencyKey: string; replayed: boolean }> {
    const idempotencyKey = opts.idempotencyKey ?? randomUUID();
    const res = await withRetries(
      () =>
        this.#request({
          method: 'POST',
          path: '/emails',
          body: email,
          headers: { 'idempotency-key': idempotencyKey },
          ...signal(opts.signal),
        }),
      this.#retry,
      this.#deps,
      signal(opts.signal),
    );
    const body = json<SendEmailResponse>(res, 'POST /emails');
    // `Idempotent-Replayed: true`: the key was seen with this request before; nothing new was sent.
    const replayed = res.headers?.['idempotent-replayed'] === 'true';
    return { id: requireString(body.id, 'POST /emails', 'id'), idempotencyKey, replayed };
  }

  async listWebhooks(): Promise<Webhook[]> {
    const res = await withRetries(
      () => this.#request({ method: 'GET', path: '/webhooks' }),
      this.#retry,
      this.#deps,
    );
    const body = json<unknown>(res, 'GET /webhooks');
    const list = Array.isArray(body) ? body : (body as { data?: unknown }).data;
    if (!Array.isArray(list)) throw new PageError('GET /webhooks: the answer holds no list', 'BAD_RESPONSE');
    return list as Webhook[];
  }

  /** Registers a webhook; the answer's signing secret is shown only this once. */
  async createWebhook(req: CreateWebhookRequest): Promise<CreatedWebhook> {
    const res = await withRetries(
      () => this.#request({ method: 'POST', path: '/webhooks', body: req }),
      this.#retry,
      this.#deps,
      { retryable: (e) => e.status === 429 },
    );
    const body = json<Record<string, unknown>>(res, 'POST /webhooks');
    const secret = body.signing_secret ?? body.secret;
    return {
      ...(body as unknown as Webhook),
      id: requireString(body.id, 'POST /webhooks', 'id'),
      signing_secret: requireString(secret, 'POST /webhooks', 'signing_secret'),
    };
  }

  async deleteWebhook(id: string): Promise<void> {
    await withRetries(
      () => this.#request({ method: 'DELETE', path: `/webhooks/${encodeURIComponent(id)}` }),
      this.#retry,
      this.#deps,
    );
  }

  /** Asks the service to post a `webhook.test` event to the registration's URL. */
  async testWebhook(id: string): Promise<unknown> {
    const res = await withRetries(
      () => this.#request({ method: 'POST', path: `/webhooks/${encodeURIComponent(id)}/test` }),
      this.#retry,
      this.#deps,
      { retryable: (e) => e.status === 429 },
    );
    return res.body.length > 0 ? json<unknown>(res, 'POST /webhooks/{id}/test') : {};
  }

  /** One page of `GET /events`, parsed as JSON but otherwise as it came. Not retried: the feed client decides. */
  /** One page of the feed; `room` takes its answer's bytes as they are read (http.ts). */
  async eventsPage(query: EventsQuery, signalIn?: AbortSignal, room?: BodyRoom): Promise<RawEventsPage> {
    const res = await this.#request({
      method: 'GET',
      path: '/events',
      query: {
        after: query.after ?? undefined,
        type: query.type && query.type.length > 0 ? query.type.join(',') : undefined,
        limit: query.limit === undefined ? undefined : String(query.limit),
      },
      ...signal(signalIn),
      ...(room ? { room } : {}),
    });
    // Never decoded lossily: bytes that are not UTF-8 are marked, and the items holding them quarantined.
    const { text, valid } = decodeUtf8(res.body);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch (err) {
      throw new PageError('GET /events: the page is not JSON', 'NOT_JSON', err);
    }
    return { body, bytes: res.body.length, rawItems: rawItems(text, body, !valid) };
  }

  /**
   * Waits until the account's budget lets the next request go, so the caller can hold
   * nothing while it waits (a feed page's memory): that request then goes at once.
   * Resolves at once when no budget is in force.
   */
  awaitBudget(signal?: AbortSignal): Promise<void> {
    return this.#budget?.takeAhead(signal) ?? Promise.resolve();
  }

  close(): Promise<void> {
    return this.#close();
  }
}

function signal(s: AbortSignal | undefined): { signal?: AbortSignal } {
  return s ? { signal: s } : {};
}

function json<T>(res: HttpResponse, what: string): T {
  try {
    return JSON.parse(res.body.toString('utf8')) as T;
  } catch (err) {
    throw new PageError(`${what}: the answer is not JSON`, 'BAD_RESPONSE', err);
  }
}

function requireString(value: unknown, what: string, field: string): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw new PageError(`${what}: the answer has no ${field}`, 'BAD_RESPONSE');
  }
  return value;
}
