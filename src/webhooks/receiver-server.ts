import { createServer, type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Logger } from '../logger.js';
import type { RefusalReason } from '../metrics/webhook-metrics.js';
import { readBody } from './read-body.js';
import type { DeliveryAnswer, DeliveryHandler } from './receiver.js';
import { SIGNATURE_HEADER } from './signature.js';

/** The path the service posts to. */
export const WEBHOOK_PATH = '/webhooks';

export interface ReceiverServerOptions {
  /** WEBHOOK_PORT; 0 picks a free port. */
  port: number;
  /** Interface to listen on. Default `0.0.0.0`. */
  host?: string;
  /** WEBHOOK_MAX_BODY_BYTES: a larger body is answered 413 and not read further. */
  maxBodyBytes: number;
  handle: DeliveryHandler;
  /** /readyz: whether deliveries can be stored now, and what was checked. */
  ready: () => Promise<{ ok: boolean; checks: Record<string, boolean> }>;
  logger: Logger;
  /** How long close() waits for requests in flight before cutting them. Default 20000 ms. */
  closeTimeoutMs?: number;
  /** The longest a request may take to arrive, headers and body. Default 30000 ms. */
  requestTimeoutMs?: number;
  /** Called with the status of every answer sent to a request at POST /webhooks' path. */
  onAnswered?: (status: number) => void;
  /** Open connections at most; more are closed as they come. Default 1024. */
  maxConnections?: number;
  /**
   * Request bodies buffered at once, in bytes, over every connection: a delivery that
   * would pass it is answered 503 with Retry-After before its body is read. Default
   * 32 MiB (128 bodies of the default WEBHOOK_MAX_BODY_BYTES).
   */
  maxBufferedBytes?: number;
  /**
   * Called for every request refused before any handler saw it: by Node's parser
   * (400 bad request, 431 headers too large), a header or body timeout (408), the
   * connection cap ('connections': closed unanswered) or the buffer budget (503).
   */
  onRefused?: (reason: RefusalReason) => void;
}

export interface ReceiverServer {
  readonly port: number;
  /** `http://<host>:<port>/webhooks`, with a loopback host when listening on every interface. */
  readonly url: string;
  /** Requests being answered now. */
  inFlight(): number;
  /** Stops accepting, lets requests in flight finish (up to closeTimeoutMs), then closes. */
  close(): Promise<void>;
}

/** What lingering after a 413 may still read and discard, so the client sees the answer, not a reset. */
const LINGER_MS = 2_000;

/** POST /webhooks, GET /healthz and /readyz, on node:http. Bad input never gets a 500. */
export async function startReceiverServer(opts: ReceiverServerOptions): Promise<ReceiverServer> {
  const log = opts.logger.child({ module: 'webhook-server' });
  const maxBuffered = opts.maxBufferedBytes ?? 32 * 1024 * 1024;
  const refused = (reason: RefusalReason): void => opts.onRefused?.(reason);
  /** Bytes reserved by the bodies being read or handled now. */
  let buffered = 0;
  let inFlight = 0;
  let closing = false;
  const idleWaiters: (() => void)[] = [];

  const server = createServer((req, res) => {
    inFlight++;
    res.once('close', () => {
      inFlight--;
      if (inFlight === 0) for (const wake of idleWaiters.splice(0)) wake();
    });
    route(req, res).catch((err: unknown) => {
      log.error({ err }, 'webhook request failed');
      if (!res.headersSent) writeJson(res, 503, { error: 'unavailable', message: 'retry later' });
      else res.destroy();
    });
  });
  server.requestTimeout = opts.requestTimeoutMs ?? 30_000;
  server.headersTimeout = Math.min(server.requestTimeout, 10_000);
  // Memory is bounded whatever the number of senders: connections are capped, bodies share
  // one budget (below), and a request that does not arrive in time is cut (408).
  server.maxConnections = opts.maxConnections ?? 1024;
  server.on('drop', () => refused('connections'));
  // What Node answers itself (a request it cannot parse, headers too large, a timeout) is
  // answered the same, and counted.
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const [status, reason]: [number, RefusalReason] =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'headers_too_large']
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? [408, 'timeout']
          : [400, 'bad_request'];
    refused(reason);
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`,
    );
  });

  // While closing, every answer ends its connection, so keep-alive clients move on.
  const reply = (
    res: ServerResponse,
    status: number,
    body: Record<string, unknown>,
    headers: Record<string, string> = {},
  ): void => writeJson(res, status, body, closing ? { ...headers, connection: 'close' } : headers);

  const route = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? '/').split('?')[0];
    const method = req.method ?? 'GET';
    if (path === WEBHOOK_PATH) {
      if (opts.onAnswered) {
        const onAnswered = opts.onAnswered;
        res.once('finish', () => onAnswered(res.statusCode));
      }
      if (method !== 'POST') return reply(res, 405, { error: 'method_not_allowed' }, { allow: 'POST' });
      return delivery(req, res);
    }
    if (path === '/healthz' || path === '/readyz') {
      if (method !== 'GET' && method !== 'HEAD') {
        return reply(res, 405, { error: 'method_not_allowed' }, { allow: 'GET, HEAD' });
      }
      if (path === '/healthz') return reply(res, closing ? 503 : 200, { ok: !closing });
      const r = await opts.ready().catch(() => ({ ok: false, checks: {} }));
      const ok = r.ok && !closing;
      return reply(res, ok ? 200 : 503, { ...r, ok });
    }
    reply(res, 404, { error: 'not_found' });
  };

  const delivery = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    // The body's room is reserved before a byte is read: its declared length, or the
    // largest body allowed when it declares none (chunked).
    const declared = Number(req.headers['content-length']);
    const reserve = Number.isSafeInteger(declared) && declared >= 0 ? declared : opts.maxBodyBytes;
    if (reserve <= opts.maxBodyBytes && buffered + reserve > maxBuffered) {
      refused('busy');
      reply(res, 503, { error: 'busy', message: 'retry later' }, { 'retry-after': '1', connection: 'close' });
      linger(req);
      return;
    }
    const held = Math.min(reserve, opts.maxBodyBytes);
    buffered += held;
    try {
      await answerDelivery(req, res);
    } finally {
      buffered -= held;
    }
  };

  const answerDelivery = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const body = await readBody(req, opts.maxBodyBytes);
    if (!body.ok) {
      if (body.reason === 'aborted') {
        res.destroy();
        return;
      }
      reply(res, 413, { error: 'payload_too_large', limit: opts.maxBodyBytes }, { connection: 'close' });
      linger(req);
      return;
    }
    const header = req.headers[SIGNATURE_HEADER];
    const answer: DeliveryAnswer = await opts.handle(
      body.body,
      Array.isArray(header) ? header.join(',') : header,
    );
    const headers: Record<string, string> = {};
    if (answer.retryAfterSec !== undefined) headers['retry-after'] = String(answer.retryAfterSec);
    reply(res, answer.status, answer.body, headers);
  };

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host ?? '0.0.0.0', () => {
      server.off('error', reject);
      resolve();
    });
  });
  // After listen, a server error (too many open files, say) is reported, never a crash.
  server.on('error', (err) => log.error({ err }, 'webhook server error'));
  const { port } = server.address() as AddressInfo;
  const host = opts.host && opts.host !== '0.0.0.0' && opts.host !== '::' ? opts.host : '127.0.0.1';

  let closed: Promise<void> | undefined;
  return {
    port,
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}${WEBHOOK_PATH}`,
    inFlight: () => inFlight,
    close() {
      closed ??= (async () => {
        closing = true;
        const done = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        const timeoutMs = opts.closeTimeoutMs ?? 20_000;
        let timer: NodeJS.Timeout | undefined;
        const idle = inFlight === 0 ? Promise.resolve() : new Promise<void>((r) => idleWaiters.push(r));
        const expired = new Promise<'expired'>((r) => {
          timer = setTimeout(() => r('expired'), timeoutMs);
        });
        if ((await Promise.race([idle, expired])) === 'expired') {
          log.warn({ inFlight }, 'requests still in flight at the close timeout; cutting them');
        }
        clearTimeout(timer);
        server.closeAllConnections();
        await done;
      })();
      return closed;
    },
  };
}

function writeJson(
  res: ServerResponse,
  status: number,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    ...headers,
  });
  res.end(res.req.method === 'HEAD' ? undefined : text);
}

/**
 * After a 413 the answer goes out and the connection closes; what the client is
 * still sending is read and thrown away for a short while, because closing a
 * socket with unread bytes resets it and the client might never see the 413.
 */
function linger(req: IncomingMessage): void {
  const timer = setTimeout(() => req.socket.destroy(), LINGER_MS);
  timer.unref();
  req.socket.once('close', () => clearTimeout(timer));
  req.resume();
}
