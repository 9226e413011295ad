import { createServer, type IncomingMessage, request, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A pass-through proxy in front of the simulator that can hold the feed still: armed
 * with a feed position, it holds the first page request whose `after` is at or past
 * it and answers nothing more until it is let go. A worker behind it cannot commit past
 * that page, so a kill made while it is held lands before the catch-up is complete,
 * however fast the machine.
 */
export interface FeedGate {
  /** The base URL to give the worker (the simulator's, through the gate). */
  readonly baseUrl: string;
  /** Resolves once a page request at or past `position` is held (`evt_` ids carry the position). */
  holdAt(position: number): Promise<void>;
  /** Drops whatever is held and lets requests through again. */
  open(): void;
  close(): Promise<void>;
}

export async function startFeedGate(simulatorBaseUrl: string): Promise<FeedGate> {
  const target = new URL(simulatorBaseUrl);
  let armed: { position: number; held: () => void } | null = null;
  const held = new Set<ServerResponse>();

  const afterOf = (req: IncomingMessage): number => {
    const after = new URL(req.url ?? '/', 'http://gate').searchParams.get('after');
    return after?.startsWith('evt_') ? Number(after.slice(4)) : 0;
  };
  const server = createServer((req, res) => {
    if (armed !== null && req.url?.includes('/events') && afterOf(req) >= armed.position) {
      held.add(res);
      res.on('close', () => held.delete(res));
      armed.held();
      return;
    }
    const upstream = request(
      { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const open = (): void => {
    armed = null;
    for (const res of held) res.destroy();
  };
  return {
    baseUrl: `http://127.0.0.1:${port}${target.pathname}`,
    holdAt(position) {
      return new Promise<void>((resolve) => {
        armed = { position, held: resolve };
      });
    },
    open,
    async close() {
      open();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
