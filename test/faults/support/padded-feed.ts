import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Served } from './served.js';

export interface PaddedFeed {
  /** `http://127.0.0.1:<port>/api` */
  readonly baseUrl: string;
  /** Every event the feed serves, as the fate check reads them. */
  readonly served: Served[];
  close(): Promise<void>;
}

/**
 * A feed on node:http of `total` email.delivered events of about `eventBytes` each
 * (their data carries padding), made on the fly for each page: the test process holds
 * none of them, so what is measured is the worker's memory alone.
 */
export async function startPaddedFeed(opts: { total: number; eventBytes: number }): Promise<PaddedFeed> {
  const pad = 'x'.repeat(Math.max(0, opts.eventBytes - 160));
  const idAt = (n: number): string => `ev_${String(n).padStart(8, '0')}`;
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://feed');
    const limit = Number(url.searchParams.get('limit') ?? 100);
    const after = url.searchParams.get('after');
    const from = after === null ? 1 : Number(after.slice(3)) + 1;
    const to = Math.min(opts.total, from + limit - 1);
    const events: string[] = [];
    for (let n = from; n <= to; n++) {
      events.push(
        `{"id":"${idAt(n)}","type":"email.delivered","created_at":"2024-05-01T00:00:00Z",` +
          `"data":{"email_id":"em_${n}","to":["someone@example.com"],"pad":"${pad}"}}`,
      );
    }
    const next = to >= from ? idAt(to) : after;
    const body = `{"data":[${events.join(',')}],"next_after":${JSON.stringify(next)}}`;
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/api`,
    served: Array.from({ length: opts.total }, (_, i) => ({ id: idAt(i + 1), type: 'email.delivered' })),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
