import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  headers: IncomingMessage['headers'];
  body: Buffer;
}

/** A webhook endpoint for tests: records every POST and answers with the next planned status. */
export interface Receiver {
  url: string;
  received: Received[];
  /** Statuses for the next requests, in order; after them, 200. */
  plan(statuses: number[]): void;
  /** Resolves once `n` requests have arrived in all. */
  waitFor(n: number): Promise<Received[]>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  let planned: number[] = [];
  const waiters: { n: number; resolve: (r: Received[]) => void }[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
    received.push({ headers: req.headers, body: Buffer.concat(chunks) });
    res.writeHead(planned.shift() ?? 200, { 'content-type': 'text/plain' }).end('ok');
    for (const w of waiters.filter((w) => received.length >= w.n)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(received);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    received,
    plan: (statuses) => {
      planned = [...statuses];
    },
    waitFor: (n) =>
      received.length >= n
        ? Promise.resolve(received)
        : new Promise((resolve) => waiters.push({ n, resolve })),
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
