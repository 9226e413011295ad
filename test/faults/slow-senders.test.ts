import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { afterAll, expect, it } from 'vitest';
import { killChildren, waitFor } from '../support/processes.js';
import {
  deliverSigned,
  memoryMb,
  receiverMemoryLimitMb,
  refusedFor,
  startReceiverChild,
  storedIds,
} from './support/receiver-child.js';
import { measured } from './support/results.js';
import { useSandboxes } from './support/sandbox.js';

const sandbox = useSandboxes();
const SECRET = 'whsec_slow_senders_0123456789';
const SENDERS = 800;
const BODY = 262_144;
afterAll(async () => {
  await killChildren();
});

/**
 * Announces a full body with a signature header that may verify (a current timestamp, a
 * v1 only the body can disprove: one that never could is refused before its body is
 * held), sends all of the body but the last byte, and holds the connection.
 */
function slowSender(port: number): Promise<Socket> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(
        `POST /webhooks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${BODY}\r\n` +
          `Service-Signature: t=${Math.floor(Date.now() / 1000)},v1=${randomBytes(32).toString('hex')}\r\n\r\n`,
      );
      socket.write(Buffer.alloc(BODY - 1, 0x20), () => resolve(socket));
    });
    socket.on('error', () => resolve(socket));
    socket.resume();
  });
}

it('24. slow senders: the receiver keeps memory bounded and counts what it refused', async () => {
  await measured(
    {
      item: 24,
      title: 'slow senders hold connections open',
      claim:
        'However many senders send nearly all of a full body and then hold their connection open, `serve-webhooks` ' +
        'buffers at most its body budget, counted as bytes arrive; bytes that find it full take the room of a body ' +
        'that has been arriving for over a second (503 to that one, `evicted`), else are refused (503 with ' +
        'Retry-After, `busy`); a body that stalls is cut at the ceiling of its pace (408, `slow_body`). Every ' +
        'refusal is counted in `feedsync_webhook_refused_total`, Node’s own 400 and 431 included, and every signed ' +
        'delivery sent meanwhile is stored once.',
      method:
        `${SENDERS} connections to \`feedsync serve-webhooks\` (the built CLI) that each announce ${BODY.toLocaleString('en-US')} bytes, ` +
        'send all but one and hold; a request the parser cannot read and one with 64 KB of headers; then 200 signed ' +
        'deliveries, retried on 503 as the service does (the attempts counted). Memory from /proc of the receiver process.',
    },
    async (rec) => {
      rec.injectedWhat = 'slow senders and bad requests';
      const box = await sandbox('slow_senders');
      const { child, port, metricsPort } = await startReceiverChild(box, SECRET);
      const idleMb = memoryMb(child.pid, 'VmRSS');
      const sockets = await Promise.all(Array.from({ length: SENDERS }, () => slowSender(port)));
      rec.injected += SENDERS;
      const heldMb = memoryMb(child.pid, 'VmRSS');

      // Node's own answers: a request line it cannot parse, and headers past its limit.
      for (const raw of [
        'NOT HTTP AT ALL\r\n\r\n',
        `GET /healthz HTTP/1.1\r\nX-Big: ${'a'.repeat(65_536)}\r\n\r\n`,
      ]) {
        const answer = await new Promise<string>((resolve) => {
          const s = connect(port, '127.0.0.1', () => s.write(raw));
          let text = '';
          s.on('data', (d) => {
            text += d.toString();
          });
          s.on('close', () => resolve(text));
          s.on('error', () => resolve(text));
        });
        expect(answer).toMatch(/^HTTP\/1\.1 (400|431) /);
        rec.injected++;
      }

      // Signed deliveries while the slow senders hold on.
      const ids: string[] = [];
      let attempts = 0;
      for (let i = 0; i < 200; i++) {
        const id = `evt_slow_${i}`;
        ids.push(id);
        await waitFor(
          async () => {
            attempts++;
            return (await deliverSigned(port, id, SECRET)).status === 200;
          },
          { timeoutMs: 60_000, what: `delivery ${id} answered 200` },
        );
      }
      const peakMb = memoryMb(child.pid, 'VmHWM');
      for (const s of sockets) s.destroy();
      const busy = await refusedFor(metricsPort, 'busy');
      const evicted = await refusedFor(metricsPort, 'evicted');
      const stalled = await refusedFor(metricsPort, 'slow_body');
      const early =
        (await refusedFor(metricsPort, 'bad_request')) + (await refusedFor(metricsPort, 'headers_too_large'));
      const stored = await storedIds(box);
      child.signal('SIGTERM');
      await child.waitExit(30_000);

      rec.checked = ids.length;
      rec.lost = ids.filter((id) => !stored.has(id)).length;
      rec.duplicated = [...stored.values()].filter((n) => n > 1).length + (stored.size - ids.length);
      rec.figures = [
        ['receiver memory idle (RSS)', `${idleMb} MB`],
        [`receiver memory with ${SENDERS} senders holding (RSS)`, `${heldMb} MB`],
        ['receiver peak memory over the whole item (VmHWM)', `${peakMb} MB`],
        ['signed deliveries, and the attempts they took', `${ids.length}, ${attempts}`],
        ['bytes refused 503 for the body budget (feedsync_webhook_refused_total busy)', busy],
        ['bodies that gave up their room after a second, 503 (evicted)', evicted],
        ['senders cut at the ceiling of their pace, 408 (slow_body)', stalled],
        ["Node's own 400 and 431, counted", early],
      ];
      expect(rec.lost).toBe(0);
      expect(rec.duplicated).toBe(0);
      // The budget holds 128 such bodies: the other senders were refused, or gave their room up.
      expect(busy + evicted).toBeGreaterThan(SENDERS / 2);
      expect(early).toBe(2);
      // 256 KiB for each of 800 senders would be 200 MB over the idle figure; what is held
      // stays within the budget (32 MiB), plus what V8 lets bodies given up await its collector
      // (about 100 MB over idle in all, here).
      expect(peakMb - idleMb).toBeLessThan(200);
      expect(peakMb).toBeLessThan(receiverMemoryLimitMb() * 1.048576);
    },
  );
});
