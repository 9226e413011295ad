import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { jsonText } from '../../src/feed/json-text.js';

/** A feed server of a test's own: serves fixed items, whatever they are, and records each query. */
export interface FeedServer {
  /** `http://127.0.0.1:<port>/api` */
  readonly baseUrl: string;
  /** The query string of every `GET /api/events`, in order. */
  readonly queries: URLSearchParams[];
  close(): Promise<void>;
}

/**
 * Pages through `items` as the service would (`after` is the id of an item,
 * `limit` caps the page, `next_after` is the last id on the page) but ignores
 * `type`, so a test can show the client filters by itself. Items without an id
 * are served in place like any other.
 */
export async function startFeedServer(
  items: readonly unknown[],
  opts: {
    /** A raw body to send instead of the page after `after` (a broken page); undefined: the page. */
    rawPage?: (after: string | null) => string | Buffer | undefined;
  } = {},
): Promise<FeedServer> {
  const queries: URLSearchParams[] = [];
  const idOf = (item: unknown): string | null => {
    const id = (item as { id?: unknown } | null)?.id;
    return typeof id === 'string' ? id : null;
  };
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://feed');
    if (url.pathname !== '/api/events') {
      res.writeHead(404).end();
      return;
    }
    queries.push(url.searchParams);
    const after = url.searchParams.get('after');
    const raw = opts.rawPage?.(after);
    if (raw !== undefined) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(raw);
      return;
    }
    const limit = Number(url.searchParams.get('limit') ?? 100);
    let start = 0;
    if (after !== null) start = items.findIndex((item) => idOf(item) === after) + 1;
    const data = items.slice(start, start + limit);
    const ids = data.map(idOf).filter((id): id is string => id !== null);
    // jsonText: an item may nest deeper than JSON.stringify can go.
    const body = jsonText({ data, next_after: ids[ids.length - 1] ?? after });
    res.writeHead(200, { 'content-type': 'application/json' }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api`,
    queries,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
