import {
  createServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
  STATUS_CODES,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Logger } from '../logger.js';
import type { RefusalReason } from '../metrics/webhook-metrics.js';
import { type BodyBudget, bodyBudget } from './body-budget.js';
import { type ConnectionCap, capConnections } from './connection-cap.js';
import { type BodyPace, type BodyRefusal, DEFAULT_BODY_PACE, readBody } from './read-body.js';
import type { DeliveryAnswer, DeliveryHandler } from './receiver.js';
import { RECEIVER_DEFAULTS } from './receiver-defaults.js';
import { SuspectSenders } from './suspect-senders.js';

/** The path the service posts to. */
const WEBHOOK_PATH = '/webhooks';

export interface ReceiverServerOptions {
  /** WEBHOOK_PORT; 0 picks a free port. */
  port: number;
  /** Interface to listen on. Default: RECEIVER_DEFAULTS.host. */
  host?: string;
  /** WEBHOOK_MAX_BODY_BYTES: a larger body is answered 413 and not read further. */
  maxBodyBytes: number;
  handle: DeliveryHandler;
  /** /readyz: whether deliveries can be stored now, and what was checked. */
  ready: () => Promise<{ ok: boolean; checks: Record<string, boolean> }>;
  logger: Logger;
  /** How long close() waits for requests in flight before cutting them. Default: RECEIVER_DEFAULTS.closeTimeoutMs. */
  closeTimeoutMs?: number;
  /** The longest a request's headers may take to arrive, from its first byte (or the connection's). Default: RECEIVER_DEFAULTS.headersTimeoutMs. */
  headersTimeoutMs?: number;
  /** How fast a body must arrive (see BodyPace). Default 10 s, then 1,000 bytes a second, 30 s at most. */
  bodyPace?: BodyPace;
  /**
   * Whether a request's signature headers may verify (their shape and timestamp window,
   * the scheme's refusal). A request whose headers never can is answered by `handle`
   * with an empty body and closed, its body never read: unsigned senders hold none of
   * the budget signed deliveries need. Default: every request may.
   */
  headerMayVerify?: (headers: IncomingMessage['headers']) => boolean;
  /**
   * Called with the status of every answer sent to a request at POST /webhooks' path, but
   * one refused for load before its signature could be checked (503 'busy' or 'evicted',
   * counted by onRefused alone): anyone can send those, and they must not read as the
   * receiver failing deliveries.
   */
  onAnswered?: (status: number) => void;
  /**
   * Open connections at most; past it the oldest one without a request in hand is closed
   * (connection-cap.ts). Default: RECEIVER_DEFAULTS.maxConnections.
   */
  maxConnections?: number;
  /**
   * Request bodies buffered at once, in bytes, over every connection, reserved as their
   * bytes arrive (body-budget.ts): a delivery whose bytes find no room is answered 503
   * with Retry-After. Default: RECEIVER_DEFAULTS.maxBufferedBytes.
   */
  maxBufferedBytes?: number;
  /**
   * When bytes find the budget full, a body that has been arriving this long (ms) gives
   * up its room to them and is answered 503 ('evicted'). Default: RECEIVER_DEFAULTS.evictAfterMs.
   */
  evictAfterMs?: number;
  /**
   * Called for every request refused before any handler saw it: by Node's parser
   * (400 bad request, 431 headers too large), headers not in time (408 'timeout'), a
   * body behind its pace (408 'slow_body'), the connection cap ('connections': the
   * oldest connection closed) or the buffer budget (503 'busy', or 'evicted' for an
   * old body whose room went to another's bytes).
   */
  onRefused?: (reason: RefusalReason) => void;
}

export interface ReceiverServer {
  readonly port: number;
  /** `http://<host>:<port>/webhooks`, with a loopback host when listening on every interface. */
  readonly url: string;
  /** Requests being answered now. */
  inFlight(): number;
  /** Bytes of request bodies held now, over every connection (the budget's count). */
  bufferedBytes(): number;
  /** Stops accepting, lets requests in flight finish (up to closeTimeoutMs), then closes. */
  close(): Promise<void>;
}

/** The body handed to `handle` for a request whose body is not read. */
const NO_BODY = Buffer.alloc(0);

/** How long a refused connection stays open, so the client sees the answer, not a reset. */
const LINGER_MS = 2_000;

/** POST /webhooks, GET /healthz and /readyz, on node:http. Bad input never gets a 500. */
export async function startReceiverServer(opts: ReceiverServerOptions): Promise<ReceiverServer> {
  const receiver = new Receiver(opts);
  const port = await receiver.listen();
  const host = opts.host && opts.host !== '0.0.0.0' && opts.host !== '::' ? opts.host : '127.0.0.1';
  return {
    port,
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}${WEBHOOK_PATH}`,
    inFlight: () => receiver.inFlight(),
    bufferedBytes: () => receiver.bufferedBytes(),
    close: () => receiver.close(),
  };
}

/**
 * The server and the state its requests share: how many are being answered, and whether
 * it is closing, which every answer and probe looks at.
 */
class Receiver {
  private readonly server: Server;
  private readonly log: Logger;
  private readonly budget: BodyBudget;
  private readonly pace: BodyPace;
  private readonly cap: ConnectionCap;
  /** Requests being answered now. */
  private answering = 0;
  private closing = false;
  private readonly idleWaiters: (() => void)[] = [];
  private closed: Promise<void> | undefined;
  /** Answers to requests refused for load before any check of their signature: not counted by onAnswered. */
  private readonly unverified = new WeakSet<ServerResponse>();
  /** Senders whose last delivery failed its signature: their bodies are read last. */
  private readonly suspects = new SuspectSenders();

  constructor(private readonly opts: ReceiverServerOptions) {
    this.log = opts.logger.child({ module: 'webhook-server' });
    this.budget = bodyBudget({
      maxBytes: opts.maxBufferedBytes ?? RECEIVER_DEFAULTS.maxBufferedBytes,
      // A whole body of the largest size arrives in well under a second on any link the service uses.
      evictAfterMs: opts.evictAfterMs ?? RECEIVER_DEFAULTS.evictAfterMs,
    });
    this.pace = opts.bodyPace ?? DEFAULT_BODY_PACE;
    // Node checks the headers' deadline on this interval (30 s by default, which would
    // let a sender that never finishes its headers hold a connection for 40 s).
    this.server = createServer({ connectionsCheckingInterval: 1_000 }, (req, res) => this.request(req, res));
    // Memory is bounded whatever the number of senders: connections are capped, bodies share
    // one budget as their bytes arrive, and a request that does not arrive in time is cut
    // (408): its headers by Node, its body by its pace (read-body.ts).
    this.server.headersTimeout = opts.headersTimeoutMs ?? RECEIVER_DEFAULTS.headersTimeoutMs;
    // A backstop only: the body's pace always ends a request sooner.
    this.server.requestTimeout = this.server.headersTimeout + this.pace.maxMs + 5_000;
    this.cap = capConnections(this.server, opts.maxConnections ?? RECEIVER_DEFAULTS.maxConnections, () =>
      this.refused('connections'),
    );
    // What Node answers itself (a request it cannot parse, headers too large, a timeout) is
    // answered the same, and counted.
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) =>
      this.clientError(err, socket),
    );
  }

  /** Requests being answered now. */
  inFlight(): number {
    return this.answering;
  }

  bufferedBytes(): number {
    return this.budget.held();
  }

  /** Listens at the options' port and host; resolves with the port. */
  async listen(): Promise<number> {
    const server = this.server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.opts.port, this.opts.host ?? RECEIVER_DEFAULTS.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    // After listen, a server error (too many open files, say) is reported, never a crash.
    server.on('error', (err) => this.log.error({ err }, 'webhook server error'));
    return (server.address() as AddressInfo).port;
  }

  /** Stops accepting, lets requests in flight finish (up to closeTimeoutMs), then closes. */
  close(): Promise<void> {
    this.closed ??= this.shutDown();
    return this.closed;
  }

  private async shutDown(): Promise<void> {
    this.closing = true;
    const done = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    const timeoutMs = this.opts.closeTimeoutMs ?? RECEIVER_DEFAULTS.closeTimeoutMs;
    let timer: NodeJS.Timeout | undefined;
    const idle =
      this.answering === 0 ? Promise.resolve() : new Promise<void>((r) => this.idleWaiters.push(r));
    const expired = new Promise<'expired'>((r) => {
      timer = setTimeout(() => r('expired'), timeoutMs);
    });
    if ((await Promise.race([idle, expired])) === 'expired') {
      this.log.warn(
        { inFlight: this.answering },
        'requests still in flight at the close timeout; cutting them',
      );
    }
    clearTimeout(timer);
    this.server.closeAllConnections();
    await done;
  }

  private request(req: IncomingMessage, res: ServerResponse): void {
    this.answering++;
    res.once('close', () => {
      this.answering--;
      if (this.answering === 0) for (const wake of this.idleWaiters.splice(0)) wake();
    });
    this.route(req, res).catch((err: unknown) => {
      this.log.error({ err }, 'webhook request failed');
      if (!res.headersSent) writeJson(res, 503, { error: 'unavailable', message: 'retry later' });
      else res.destroy();
    });
  }

  private clientError(err: NodeJS.ErrnoException, socket: Socket): void {
    // The client went away (a reset, or its end in the middle of a request): nobody to answer.
    if (err.code === 'ECONNRESET' || err.code === 'HPE_INVALID_EOF_STATE' || !socket.writable) {
      socket.destroy();
      return;
    }
    const [status, reason]: [number, RefusalReason] =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'headers_too_large']
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? [408, 'timeout']
          : [400, 'bad_request'];
    this.refused(reason);
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`,
    );
  }

  private refused(reason: RefusalReason): void {
    this.opts.onRefused?.(reason);
  }

  // While closing, every answer ends its connection, so keep-alive clients move on.
  private reply(
    res: ServerResponse,
    status: number,
    body: Record<string, unknown>,
    headers: Record<string, string> = {},
  ): void {
    writeJson(res, status, body, this.closing ? { ...headers, connection: 'close' } : headers);
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    const method = req.method ?? 'GET';
    if (path === WEBHOOK_PATH) {
      if (this.opts.onAnswered) {
        const onAnswered = this.opts.onAnswered;
        res.once('finish', () => {
          if (!this.unverified.has(res)) onAnswered(res.statusCode);
        });
      }
      if (method !== 'POST') return this.reply(res, 405, { error: 'method_not_allowed' }, { allow: 'POST' });
      return this.delivery(req, res);
    }
    if (path === '/healthz' || path === '/readyz') {
      if (method !== 'GET' && method !== 'HEAD') {
        return this.reply(res, 405, { error: 'method_not_allowed' }, { allow: 'GET, HEAD' });
      }
      if (path === '/healthz') return this.reply(res, this.closing ? 503 : 200, { ok: !this.closing });
      const r = await this.opts.ready().catch(() => ({ ok: false, checks: {} }));
      const ok = r.ok && !this.closing;
      return this.reply(res, ok ? 200 : 503, { ...r, ok });
    }
    this.reply(res, 404, { error: 'not_found' });
  }

  private async delivery(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const headers = req.headers;
    if (this.opts.headerMayVerify && !this.opts.headerMayVerify(headers)) {
      // The handler answers (and counts) the refusal as it would after the body: 401.
      const answer = await this.opts.handle(NO_BODY, headers);
      this.reply(res, answer.status, answer.body, { connection: 'close' });
      linger(req);
      return;
    }
    const sender = req.socket.remoteAddress;
    const body = await readBody(req, {
      limit: this.opts.maxBodyBytes,
      budget: this.budget,
      suspect: this.suspects.has(sender),
      pace: this.pace,
    });
    if (!body.ok) return this.refuseBody(req, res, body.reason);
    // Whole now: the cap spares this connection until its answer is out, and the body keeps its room.
    const socket = req.socket;
    this.cap.handling(socket);
    res.once('close', () => this.cap.handled(socket));
    try {
      const answer: DeliveryAnswer = await this.opts.handle(body.body, headers);
      this.suspects.answered(sender, answer.status);
      const sent: Record<string, string> = {};
      if (answer.retryAfterSec !== undefined) sent['retry-after'] = String(answer.retryAfterSec);
      this.reply(res, answer.status, answer.body, sent);
    } finally {
      body.release();
    }
  }

  /** Answers a body that was not read whole, and closes its connection. */
  private refuseBody(req: IncomingMessage, res: ServerResponse, reason: BodyRefusal): void {
    if (reason === 'aborted') {
      res.destroy();
      return;
    }
    if (reason === 'too-large') {
      this.reply(
        res,
        413,
        { error: 'payload_too_large', limit: this.opts.maxBodyBytes },
        { connection: 'close' },
      );
    } else if (reason === 'busy' || reason === 'evicted') {
      this.refused(reason);
      this.unverified.add(res);
      this.reply(
        res,
        503,
        { error: 'busy', message: 'retry later' },
        { 'retry-after': '1', connection: 'close' },
      );
    } else {
      this.refused('slow_body');
      this.reply(
        res,
        408,
        { error: 'request_timeout', message: 'the body came too slowly' },
        { connection: 'close' },
      );
    }
    linger(req);
  }
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
 * After a refusal (413, 503, 408) the answer goes out and the connection closes, but
 * only after a short while: closing a socket with unread bytes resets it, and the
 * client might never see the answer. What the client is still sending is left unread
 * meanwhile (the kernel's buffers hold it, then the reset drops it): reading it only
 * to throw it away would cost memory that hundreds of refused senders add up.
 */
function linger(req: IncomingMessage): void {
  const timer = setTimeout(() => req.socket.destroy(), LINGER_MS);
  timer.unref();
  req.socket.once('close', () => clearTimeout(timer));
}
