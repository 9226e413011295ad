// A flood of unsigned deliveries, in a process of its own so that the test process
// measures the answers to signed deliveries without its load.
// Environment: PORT; SENDERS loops that each open a connection, send the headers of an
// unsigned POST and a BODY-byte body at once, close the connection a CYCLE_MS after it
// opened (sooner when the receiver closes it) and start again: SENDERS * BODY bytes
// offered every CYCLE_MS. Prints `ready` once the first round is on its way; on SIGTERM
// stops, prints {requests, bytesSent, answers} as JSON and exits: `answers` counts the
// requests by the status line the receiver answered (or `none`).

import { connect } from 'node:net';

const port = Number(process.env.PORT);
const senders = Number(process.env.SENDERS);
const bodyBytes = Number(process.env.BODY);
const cycleMs = Number(process.env.CYCLE_MS);
const body = Buffer.alloc(bodyBytes, 0x20);
const head = Buffer.from(
  `POST /webhooks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${bodyBytes}\r\n\r\n`,
);

let running = true;
let requests = 0;
let started = 0;
const answers = {};
const open = new Set();

function send() {
  if (!running) return;
  requests++;
  const at = performance.now();
  const socket = connect(port, '127.0.0.1', () => {
    socket.write(head);
    socket.write(body);
  });
  open.add(socket);
  let answer;
  socket.on('data', (chunk) => {
    answer ??= chunk.toString('latin1').split('\r\n')[0];
  });
  socket.on('error', () => {});
  const cut = setTimeout(() => socket.destroy(), cycleMs);
  socket.on('close', () => {
    clearTimeout(cut);
    open.delete(socket);
    if (!running) return;
    answers[answer ?? 'none'] = (answers[answer ?? 'none'] ?? 0) + 1;
    // The next one no sooner than a cycle after this one began.
    setTimeout(send, Math.max(0, cycleMs - (performance.now() - at)));
  });
  if (++started === senders) process.stdout.write('ready\n');
}

for (let i = 0; i < senders; i++) send();

process.once('SIGTERM', () => {
  running = false;
  for (const socket of open) socket.destroy();
  process.stdout.write(
    `${JSON.stringify({ requests, bytesSent: requests * (head.length + bodyBytes), answers })}\n`,
  );
  process.exit(0);
});
