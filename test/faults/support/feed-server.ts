import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ServiceEvent } from '../../../src/api/types.js';
import { jsonText } from '../../../src/feed/json-text.js';

/** Ways a page can break the rules of DESIGN section 1 and 4. */
export type BadPage =
  | 'too-many'
  | 'too-big'
  | 'not-json'
  | 'no-list'
  | 'same-id-twice'
  | 'cursor-loop'
  | 'back-short'
  | 'back-full'
  | 'stuck-full'
  | 'hang'
  | 'stall-mid-body';

export interface FeedServer {
  /** `http://127.0.0.1:<port>/api` */
  readonly baseUrl: string;
  /** The page (1-based, in pages of `limit`) that misbehaves, and how; null for none. */
  setBad(bad: { page: number; kind: BadPage } | null): void;
  /** Requests answered so far. */
  readonly requests: number;
  close(): Promise<void>;
}

/** `count` small email events with ids `ev_00001`…, in feed order. */
export function feedEvents(count: number): ServiceEvent[] {
  const start = Date.parse('2024-05-01T00:00:00Z');
  return Array.from({ length: count }, (_, i) => ({
    id: `ev_${String(i + 1).padStart(5, '0')}`,
    type: 'email.delivered',
    created_at: new Date(start + i * 1000).toISOString(),
    data: { email_id: `em_${i + 1}`, to: ['someone@example.com'] },
  }));
}

/**
 * A feed on node:http that serves `events` in pages the way the simulator does,
 * except for one page that breaks a rule. The key is not checked.
 */
export async function startFeedServer(events: readonly ServiceEvent[]): Promise<FeedServer> {
  let bad: { page: number; kind: BadPage } | null = null;
  let requests = 0;
  const hanging = new Set<ServerResponse>();
  const server = createServer((req, res) => {
    requests++;
    const url = new URL(req.url ?? '/', 'http://feed');
    if (url.pathname !== '/api/events') {
      res.writeHead(404).end();
      return;
    }
    const limit = Number(url.searchParams.get('limit') ?? 100);
    const after = url.searchParams.get('after');
    const start = after === null ? 0 : events.findIndex((e) => e.id === after) + 1;
    let data: unknown[] = events.slice(start, start + limit);
    let nextAfter: string | null = data.length > 0 ? (data.at(-1) as ServiceEvent).id : after;
    let body: string | null = null;
    // The bad page is the one read after the end of page `page - 1` (pages of `limit`).
    const badAfter = bad && bad.page > 1 ? (events[(bad.page - 1) * limit - 1]?.id ?? null) : null;
    const kind = bad && after === badAfter ? bad.kind : null;
    switch (kind) {
      case 'too-many':
        data = events.slice(start, start + limit + 1);
        break;
      case 'too-big':
        data = data.map((e) => ({
          ...(e as ServiceEvent),
          data: { ...(e as ServiceEvent).data, pad: 'x'.repeat(400) },
        }));
        break;
      case 'not-json':
        body = '<html><body>502 Bad Gateway</body></html>';
        break;
      case 'no-list':
        body = JSON.stringify({ items: 'none', count: data.length, next_after: nextAfter });
        break;
      case 'same-id-twice':
        data = [...data.slice(0, limit - 1), data[0]];
        nextAfter = (data.at(-2) as ServiceEvent).id;
        break;
      case 'cursor-loop':
        nextAfter = events[limit - 1]!.id;
        break;
      // next_after names an event in the middle of the page before: on a short (last) page, or a full one.
      case 'back-short':
        data = data.slice(0, limit >> 1);
        nextAfter = events[start - (limit >> 1)]!.id;
        break;
      case 'back-full':
        nextAfter = events[start - (limit >> 1)]!.id;
        break;
      // A full page whose next_after is the after that was sent: the cursor would never move.
      case 'stuck-full':
        nextAfter = after;
        break;
      default:
        break;
    }
    // jsonText: a poison event may nest deeper than JSON.stringify can go.
    body ??= jsonText({ data, next_after: nextAfter });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    if (kind === 'hang' || kind === 'stall-mid-body') {
      // Headers sent, then the body never ends (half of it, or none): the client's body timeout must fire.
      hanging.add(res);
      res.on('close', () => hanging.delete(res));
      if (kind === 'hang') res.flushHeaders();
      else res.write(body.slice(0, body.length >> 1));
      return;
    }
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    baseUrl: `http://127.0.0.1:${port}/api`,
    setBad(next) {
      bad = next;
    },
    get requests() {
      return requests;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of hanging) res.destroy();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
