// Senders that trickle their bodies to a receiver, in a process of their own so that the
// test process measures the answers to signed deliveries without their load.
// Environment: PORT; SENDERS connections that each declare DECLARED bytes and send one
// every TRICKLE_MS; REOPEN=1 opens a connection again as soon as the receiver closes it.
// Prints `ready` once every sender has connected; on SIGTERM closes them all, prints
// {opened, closedByReceiver, peakOpen, answers} as JSON and exits: `answers` counts the
// closed connections by the status line the receiver answered before closing (or the
// socket error, or `none`). Each sends a signature header that may verify (a current
// timestamp, a v1 only the body can disprove): a header that never could is refused
// before any of its body is held, and would not test the body's deadline.

import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';

const port = Number(process.env.PORT);
const senders = Number(process.env.SENDERS);
const declared = Number(process.env.DECLARED);
const trickleMs = Number(process.env.TRICKLE_MS);
const reopen = process.env.REOPEN === '1';

const open = new Set();
let running = true;
let opened = 0;
let connected = 0;
let closedByReceiver = 0;
let peakOpen = 0;
const answers = {};

function start() {
  opened++;
  const socket = connect(port, '127.0.0.1', () => {
    socket.write(
      `POST /webhooks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\n` +
        `Service-Signature: t=${Math.floor(Date.now() / 1000)},v1=${randomBytes(32).toString('hex')}\r\n\r\n{`,
    );
    if (++connected === senders) process.stdout.write('ready\n');
  });
  open.add(socket);
  peakOpen = Math.max(peakOpen, open.size);
  let answer;
  socket.on('data', (chunk) => {
    answer ??= chunk.toString('latin1').split('\r\n')[0];
  });
  socket.on('error', (err) => {
    answer ??= err.code;
  });
  socket.on('close', () => {
    open.delete(socket);
    if (!running) return;
    closedByReceiver++;
    answers[answer ?? 'none'] = (answers[answer ?? 'none'] ?? 0) + 1;
    if (reopen) start();
  });
}

for (let i = 0; i < senders; i++) start();
const timer = setInterval(() => {
  // Not before a socket has connected: its headers go first.
  for (const socket of open) if (socket.writable && !socket.connecting) socket.write(' ');
}, trickleMs);

process.once('SIGTERM', () => {
  running = false;
  clearInterval(timer);
  for (const socket of open) socket.destroy();
  process.stdout.write(`${JSON.stringify({ opened, closedByReceiver, peakOpen, answers })}\n`);
  process.exit(0);
});
