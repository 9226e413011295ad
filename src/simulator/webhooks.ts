import { randomBytes } from 'node:crypto';
import type { CreatedWebhook, Webhook } from '../api/types.js';
import { badRequest, SimError } from './errors.js';
import { type JsonObject, stringField, stringListField } from './json-body.js';

/** A stored registration; the secret is only ever shown in the answer to its creation. */
export interface Registration {
  id: string;
  url: string;
  events: string[];
  created_at: string;
  signing_secret: string;
  /** The account it belongs to: its deliveries count there. */
  account_id: string;
}

const TYPE_PATTERN = /^[a-z][a-z_]*(\.[a-z][a-z_]*)+$/;

/** Checks a `POST /webhooks` body: an http(s) `url` and `events`, "*" or full type names. */
export function parseCreateWebhook(body: JsonObject): { url: string; events: string[] } {
  const url = stringField(body, 'url');
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw badRequest('invalid_field', '"url" must be an absolute http(s) URL');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw badRequest('invalid_field', '"url" must be an absolute http(s) URL');
  }
  const events = [...new Set(stringListField(body, 'events'))];
  for (const type of events) {
    if (type !== '*' && !TYPE_PATTERN.test(type)) {
      throw badRequest('invalid_field', `"events" holds "${type.slice(0, 64)}": use "*" or full type names`);
    }
  }
  return { url, events };
}

export function publicView(reg: Registration): Webhook {
  return { id: reg.id, url: reg.url, events: [...reg.events], created_at: reg.created_at };
}

export class WebhookRegistry {
  private readonly byId = new Map<string, Registration>();

  constructor(
    private readonly now: () => number,
    private readonly accountId: string,
  ) {}

  create(input: { url: string; events: string[] }): CreatedWebhook {
    const reg: Registration = {
      id: `wh_${randomBytes(8).toString('hex')}`,
      url: input.url,
      events: input.events,
      created_at: new Date(this.now()).toISOString(),
      signing_secret: `whsec_${randomBytes(24).toString('hex')}`,
      account_id: this.accountId,
    };
    this.byId.set(reg.id, reg);
    return { ...publicView(reg), signing_secret: reg.signing_secret };
  }

  list(): Webhook[] {
    return [...this.byId.values()].map(publicView);
  }

  find(id: string): Registration | undefined {
    return this.byId.get(id);
  }

  /** The registration, or a 404 `webhook_not_found`. */
  get(id: string): Registration {
    const reg = this.byId.get(id);
    if (!reg) throw new SimError(404, 'webhook_not_found', `no webhook with id ${id.slice(0, 64)}`);
    return reg;
  }

  delete(id: string): void {
    this.get(id);
    this.byId.delete(id);
  }

  /** Registrations that want events of this type. */
  matching(type: string): Registration[] {
    return [...this.byId.values()].filter((reg) => reg.events.includes('*') || reg.events.includes(type));
  }
}
