import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy on a free loopback port that can stop forwarding while keeping every
 * socket open, as a network partition or a hung node does: nothing is refused or
 * reset, the bytes just stop (held here, so they arrive once it forwards again, late).
 */
export interface StallingProxy {
  readonly port: number;
  /** Stops forwarding in both directions; the sockets stay open. */
  stall(): void;
  /**
   * Stops forwarding on the connections open now, as a stuck backend or a dropped flow
   * does to one session; connections made later pass as usual.
   */
  freezeOpen(): void;
  /** Forwards again, what waited first. */
  resume(): void;
  close(): Promise<void>;
}

export async function startStallingProxy(target: { host: string; port: number }): Promise<StallingProxy> {
  const sockets = new Set<Socket>();
  /** Writes held back while stalled, in order, by the socket they go to. */
  const held: { to: Socket; data: Buffer }[] = [];
  let stalled = false;
  const frozen = new Set<Socket>();
  const forward = (from: Socket, to: Socket): void => {
    from.on('data', (data: Buffer) => {
      if (stalled || frozen.has(from)) held.push({ to, data });
      else to.write(data);
    });
  };
  const server: Server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    sockets.add(client).add(upstream);
    forward(client, upstream);
    forward(upstream, client);
    const end = (): void => {
      sockets.delete(client);
      sockets.delete(upstream);
      frozen.delete(client);
      frozen.delete(upstream);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('proxy has no port');
  return {
    port: address.port,
    stall() {
      stalled = true;
    },
    freezeOpen() {
      for (const s of sockets) frozen.add(s);
    },
    resume() {
      stalled = false;
      frozen.clear();
      for (const { to, data } of held.splice(0)) if (!to.destroyed) to.write(data);
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
