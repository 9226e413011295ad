import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/** Which connections hold a request in hand, so that the cap spares them. */
export interface ConnectionCap {
  /** The socket's request has arrived whole and is being answered: never closed to make room. */
  handling(socket: Socket): void;
  /** Its answer is out: the socket may make room again. */
  handled(socket: Socket): void;
  /** Connections open now. */
  open(): number;
}

/**
 * Keeps at most `max` connections open. A connection past the cap does not wait or get
 * dropped: the oldest connection without a request in hand (still sending headers or a
 * body, or idle between requests) is closed to make room, and `onEvicted` counts it.
 * Senders that hold connections open lose their oldest ones first, so memory stays
 * bounded however many sockets come, and a delivery that arrives now and sends its
 * request at once is still served. Only when every connection has a request in hand is
 * the new one closed instead.
 */
export function capConnections(server: Server, max: number, onEvicted: () => void): ConnectionCap {
  /** In the order they opened: the first is the oldest. */
  const open = new Set<Socket>();
  const busy = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    open.add(socket);
    socket.once('close', () => {
      open.delete(socket);
      busy.delete(socket);
    });
    if (open.size <= max) return;
    let victim = socket;
    for (const s of open) {
      if (!busy.has(s)) {
        victim = s;
        break;
      }
    }
    open.delete(victim);
    onEvicted();
    victim.destroy();
  });
  return {
    handling: (socket) => {
      busy.add(socket);
    },
    handled: (socket) => {
      busy.delete(socket);
    },
    open: () => open.size,
  };
}
