import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { signWebhookPayload } from '../../src/webhooks/signature.js';
import { testConfig } from '../support/config.js';
import { uniqueSchema } from '../support/postgres.js';
import { waitFor } from '../support/processes.js';
import { uniquePrefix } from '../support/redis.js';
import {
  captureLogger,
  deliver,
  emailEvent,
  SECRET_NEW,
  startTestReceiver,
  type TestReceiver,
} from './helpers.js';

// A signature header that can never verify (none, malformed, stale) is refused before
// its body is read: such senders hold none of the body budget signed deliveries need.

const schema = uniqueSchema('wh_unsigned');
const prefix = uniquePrefix('wh-unsigned');
const BODY = 262_144;
/** More senders than the default budget (32 MiB) holds bodies of 256 KiB. */
const SENDERS = 140;
const config = testConfig(
  { schema, prefix },
  { WEBHOOK_SECRET: SECRET_NEW, WEBHOOK_MAX_BODY_BYTES: String(BODY) },
);
const logs = captureLogger();
const sockets: Socket[] = [];
let rx: TestReceiver;

beforeAll(async () => {
  rx = await startTestReceiver(config, logs.logger, { connections: 4, schema, prefix });
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  await rx?.close();
});

/** Sends the headers and all of a 256 KiB body but its last byte; resolves with the status line it is answered. */
function holdBody(port: number, signature: string | null): Promise<string> {
  const head =
    `POST /webhooks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${BODY}\r\n` +
    `${signature === null ? '' : `Service-Signature: ${signature}\r\n`}\r\n`;
  const socket = connect(port, '127.0.0.1', () =>
    socket.write(Buffer.concat([Buffer.from(head), Buffer.alloc(BODY - 1, 0x20)])),
  );
  sockets.push(socket);
  let text = '';
  socket.on('data', (d) => {
    text += d.toString();
  });
  socket.on('error', () => {});
  return new Promise((resolve) => socket.on('close', () => resolve(text.split('\r\n')[0] ?? '')));
}

it('answers 401 to senders whose signature can never verify without reading their bodies; a signed delivery among them is stored', async () => {
  const port = rx.service.server.port;
  const stale = signWebhookPayload('{}', SECRET_NEW, Math.floor(Date.now() / 1000) - 3_600);
  const headers = [null, 't=abc,v1=00', stale];
  const answers = Array.from({ length: SENDERS }, (_, i) => holdBody(port, headers[i % headers.length]!));
  await waitFor(async () => sockets.every((s) => s.bytesWritten > 0), { what: 'the senders to connect' });
  const event = emailEvent('email.delivered');
  const signed = await deliver(rx.pool, JSON.stringify(event));
  expect(signed.status).toBe(200);
  // Each one answered 401 although its body never came whole: the body was not waited for.
  expect(new Set(await Promise.all(answers))).toEqual(new Set(['HTTP/1.1 401 Unauthorized']));
});
