import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { RefusalReason } from '../../src/metrics/webhook-metrics.js';
import { type ReceiverServer, startReceiverServer } from '../../src/webhooks/receiver-server.js';
import { waitFor } from '../support/processes.js';
import { captureLogger } from './helpers.js';

const logs = captureLogger({ level: 'warn' });
const MAX_BODY = 262_144;
const sockets: Socket[] = [];
let server: ReceiverServer | undefined;
let refusals: RefusalReason[] = [];
/** Statuses the receiver counted as answers to deliveries (feedsync_webhook_requests_total). */
let answered: number[] = [];
/** Bodies the handler saw, by length. */
let handled: number[] = [];

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await server?.close();
  server = undefined;
  refusals = [];
  answered = [];
  handled = [];
});

/**
 * The receiver's HTTP layer over a handler that answers 200 to any body: what is under
 * test is who gets to the handler. Short deadlines, so that the file runs in seconds.
 */
async function start(
  over: { maxConnections?: number; maxBufferedBytes?: number; evictAfterMs?: number } = {},
): Promise<ReceiverServer> {
  server = await startReceiverServer({
    port: 0,
    host: '127.0.0.1',
    maxBodyBytes: MAX_BODY,
    logger: logs.logger,
    handle: async (raw) => {
      handled.push(raw.length);
      // A body that begins "bad" is refused as a wrong signature would be.
      if (raw.subarray(0, 3).toString() === 'bad')
        return { status: 401, body: { error: 'invalid_signature' } };
      return { status: 200, body: { received: true } };
    },
    ready: async () => ({ ok: true, checks: {} }),
    headersTimeoutMs: 1_500,
    bodyPace: { graceMs: 800, minBytesPerSec: 1000, maxMs: 2_000 },
    onRefused: (reason) => refusals.push(reason),
    onAnswered: (status) => answered.push(status),
    closeTimeoutMs: 100,
    ...over,
  });
  return server;
}

/** Opens a connection (from `from`, a loopback address), writes `head`, and collects what comes back until it closes. */
function open(
  port: number,
  head: string | Buffer,
  from = '127.0.0.1',
): { socket: Socket; answer: Promise<string> } {
  const socket = connect({ port, host: '127.0.0.1', localAddress: from }, () => socket.write(head));
  sockets.push(socket);
  let text = '';
  socket.on('data', (d) => {
    text += d.toString();
  });
  socket.on('error', () => {});
  const answer = new Promise<string>((resolve) => socket.on('close', () => resolve(text)));
  return { socket, answer };
}

const post = (length: number, body: string | Buffer = '') =>
  Buffer.concat([
    Buffer.from(`POST /webhooks HTTP/1.1\r\nHost: x\r\nContent-Length: ${length}\r\n\r\n`),
    Buffer.from(body),
  ]);

/** A whole delivery on a connection of its own: the status line of the answer. */
async function deliver(port: number, size = 1000, from = '127.0.0.1', start = 'x'): Promise<string> {
  const { socket, answer } = open(port, post(size, start + 'x'.repeat(size - start.length)), from);
  socket.once('data', () => socket.end());
  return (await answer).split('\r\n')[0] ?? '';
}

describe('serve-webhooks under senders that abuse it', () => {
  it('reserves body bytes as they arrive: 200 senders that declare 256 KiB and send a byte leave room for a delivery', async () => {
    // Room for 4 declared bodies: reserving what is declared would refuse the delivery.
    const { port } = await start({ maxBufferedBytes: 4 * MAX_BODY });
    const held = Array.from({ length: 200 }, () => open(port, post(MAX_BODY, 'x')));
    await waitFor(async () => held.every((h) => h.socket.bytesWritten > 0), {
      what: 'the senders to connect',
    });
    expect(await deliver(port, 100_000)).toBe('HTTP/1.1 200 OK');
    expect(handled).toEqual([100_000]);
    expect(refusals).not.toContain('busy');
  });

  it('answers 503 busy when the bytes actually held would pass the budget, and has room again once they go', async () => {
    const { port } = await start({ maxBufferedBytes: 2 * MAX_BODY, evictAfterMs: 60_000 });
    // Two senders hold nearly a whole body each; a third's bytes find no room.
    const holders = [
      open(port, post(MAX_BODY, 'x'.repeat(MAX_BODY - 1))),
      open(port, post(MAX_BODY, 'x'.repeat(MAX_BODY - 1))),
    ];
    // Arranged, not timed: the receiver has read and holds both bodies.
    await waitFor(async () => server!.bufferedBytes() >= 2 * (MAX_BODY - 1), { what: 'both bodies held' });
    expect(await deliver(port, 50_000)).toBe('HTTP/1.1 503 Service Unavailable');
    expect(refusals).toContain('busy');
    // Refused before its signature could be checked: counted apart, never as an answer (no 5xx alert).
    expect(answered).not.toContain(503);
    for (const h of holders) h.socket.destroy();
    await waitFor(async () => (await deliver(port, 50_000)) === 'HTTP/1.1 200 OK', { what: 'room again' });
    expect(answered.at(-1)).toBe(200);
  });

  it('reads the bodies of a sender whose last delivery failed its signature last: they hold a quarter of the budget at most', async () => {
    const { port } = await start({ maxBufferedBytes: 2 * MAX_BODY, evictAfterMs: 60_000 });
    const flooder = '127.0.0.2';
    expect(await deliver(port, 1000, flooder, 'bad')).toBe('HTTP/1.1 401 Unauthorized');
    // As in the case above, two bodies that would fill the budget; from this sender, past
    // its share, they are refused (503, counted apart) and hold nothing.
    const holders = [
      open(port, post(MAX_BODY, 'x'.repeat(MAX_BODY - 1)), flooder),
      open(port, post(MAX_BODY, 'x'.repeat(MAX_BODY - 1)), flooder),
    ];
    // Arranged, not timed: the receiver has read both bodies and refused them past the share.
    await waitFor(async () => refusals.filter((r) => r === 'busy').length === 2, { what: 'both refused' });
    expect(server!.bufferedBytes()).toBe(0);
    expect(await deliver(port, 200_000)).toBe('HTTP/1.1 200 OK');
    expect(answered).not.toContain(503);
    // A delivery from it that verifies clears its mark.
    expect(await deliver(port, 1000, flooder)).toBe('HTTP/1.1 200 OK');
    for (const h of holders)
      expect((await h.answer).split('\r\n')[0]).toBe('HTTP/1.1 503 Service Unavailable');
  });

  it('gives the room of bodies that stalled after a burst to a delivery that comes whole (503 to them, counted evicted)', async () => {
    const { port } = await start({ maxBufferedBytes: 2 * MAX_BODY, evictAfterMs: 300 });
    const holders = [0, 1].map(() => open(port, post(MAX_BODY, 'x'.repeat(MAX_BODY - 1))));
    await waitFor(async () => holders.every((h) => h.socket.bytesWritten > MAX_BODY - 1), {
      what: 'the holders to send',
    });
    await new Promise((r) => setTimeout(r, 400));
    expect(await deliver(port, 200_000)).toBe('HTTP/1.1 200 OK');
    expect(handled).toEqual([200_000]);
    // The oldest gave up its room, and only as much as was needed.
    expect(refusals).toEqual(['evicted']);
    expect((await holders[0]!.answer).split('\r\n')[0]).toBe('HTTP/1.1 503 Service Unavailable');
    expect(answered).toEqual([200]);
    expect(holders[1]!.socket.closed).toBe(false);
  });

  it('cuts a body that trickles (408, counted slow_body); a body of the same size sent at once is served', async () => {
    const { port } = await start();
    const slow = open(port, post(MAX_BODY, 'x'));
    const timer = setInterval(() => slow.socket.write('x'), 200);
    try {
      expect((await slow.answer).split('\r\n')[0]).toBe('HTTP/1.1 408 Request Timeout');
    } finally {
      clearInterval(timer);
    }
    expect(refusals).toEqual(['slow_body']);
    expect(await deliver(port, MAX_BODY)).toBe('HTTP/1.1 200 OK');
    expect(handled).toEqual([MAX_BODY]);
  });

  it('cuts a body that stalls after a burst at the ceiling of its pace', async () => {
    const { port } = await start();
    const stalled = open(port, post(MAX_BODY, 'x'.repeat(MAX_BODY - 1)));
    expect((await stalled.answer).split('\r\n')[0]).toBe('HTTP/1.1 408 Request Timeout');
    expect(refusals).toEqual(['slow_body']);
  });

  it('cuts headers never finished, and a connection that sends nothing (408, counted timeout)', async () => {
    const { port } = await start();
    const unfinished = open(port, 'POST /webhooks HTTP/1.1\r\nHost: x\r\n');
    const silent = open(port, '');
    expect((await unfinished.answer).split('\r\n')[0]).toBe('HTTP/1.1 408 Request Timeout');
    await silent.answer;
    expect(refusals).toEqual(['timeout', 'timeout']);
  });

  it('past the connection cap closes the oldest connection without a request in hand, so a new delivery is served', async () => {
    const cap = 20;
    const { port } = await start({ maxConnections: cap });
    const idle = Array.from({ length: 2 * cap }, () => open(port, post(MAX_BODY, 'x')));
    await waitFor(async () => idle.filter((h) => h.socket.closed).length >= cap, {
      what: 'the oldest connections to be closed',
    });
    // The oldest went first: every one of the first `cap` is closed, unanswered.
    expect(idle.slice(0, cap).every((h) => h.socket.closed)).toBe(true);
    expect(refusals.filter((r) => r === 'connections')).toHaveLength(cap);
    expect(await deliver(port)).toBe('HTTP/1.1 200 OK');
    expect(idle.filter((h) => !h.socket.closed).length).toBeLessThanOrEqual(cap);
  });
});
