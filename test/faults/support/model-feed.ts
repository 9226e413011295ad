import type { ServiceEvent } from '../../../src/api/types.js';
import type { FetchPage } from '../../../src/feed/feed-client.js';
import { parsePage } from '../../../src/feed/page.js';

const TYPES = [
  'email.sent',
  'email.delivered',
  'email.bounced',
  'email.complained',
  'email.failed',
  'contact.subscribed',
  'contact.unsubscribed',
  'webhook.test',
] as const;

/**
 * A model of the service's feed, in memory: events in order, that grows when
 * told; pages as DESIGN says (next_after = last id, or the `after` sent when
 * empty), some of which repeat the last few events before `after`, as a real feed
 * may. Pages go through the real page parser.
 */
export class ModelFeed {
  readonly events: ServiceEvent[] = [];
  /** Pages served, re-reads included. */
  pages = 0;
  private readonly started = Date.parse('2024-05-01T00:00:00Z');

  constructor(
    private readonly random: () => number,
    private readonly duplicateRate: number,
  ) {}

  /** Appends `count` events of random types, about a handful of emails. */
  append(count: number): void {
    for (let i = 0; i < count; i++) {
      const n = this.events.length + 1;
      const type = TYPES[Math.floor(this.random() * TYPES.length)]!;
      const email = `em_${Math.floor(this.random() * 12)}`;
      this.events.push({
        id: `m_${String(n).padStart(6, '0')}`,
        type,
        // Not always increasing: the projection must not depend on arrival order.
        created_at: new Date(this.started + n * 1000 - Math.floor(this.random() * 5000)).toISOString(),
        data: type.startsWith('email.')
          ? { email_id: email, to: [`${email}@example.com`] }
          : { email: `c${n}@x.test` },
      });
    }
  }

  /** The raw body of `GET /events?after=&limit=`. */
  body(after: string | null, limit: number): unknown {
    this.pages++;
    const start = after === null ? 0 : this.events.findIndex((e) => e.id === after) + 1;
    if (after !== null && start === 0) throw new Error(`the model feed has no event ${after}`);
    const fresh = this.events.slice(start, start + limit);
    let data = fresh;
    // As the simulator does: at least one new event follows the repeats, so next_after moves on.
    if (start > 0 && fresh.length > 0 && limit > 1 && this.random() < this.duplicateRate) {
      const repeat = 1 + Math.floor(this.random() * Math.min(3, start, limit - 1));
      data = [...this.events.slice(start - repeat, start), ...fresh].slice(0, limit);
    }
    return { data, next_after: data.length > 0 ? data.at(-1)!.id : after };
  }

  /** A FetchPage over this model, yielding to the event loop between request and answer. */
  fetcher(limit: number, pause: () => Promise<void>): FetchPage {
    return async (after) => {
      await pause();
      const body = this.body(after, limit);
      await pause();
      const bytes = Buffer.byteLength(JSON.stringify(body));
      return { ...parsePage(body, { after, limit, listField: null, types: null }), bytes };
    };
  }
}
