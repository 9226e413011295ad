import pg from 'pg';
import { hostOf } from '../config/connection-url.js';
import { FeedsyncError } from '../errors.js';

type ConnectCallback = ((err: Error) => void) | ((err: null, c: pg.Client) => void);

/** Failures of the operating system that already say where nothing answered (the CLI's line names them). */
const SAID_BY_SYSTEM = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

/**
 * The pg Client class a store's pool makes its connections with: each connection,
 * TCP, TLS and start-up included, must be ready within `timeoutMs`, or it fails with
 * an error that names DATABASE_URL and the address (never the password). Without it
 * pg waits for ever on an address where nothing answers, or where another service
 * does (Redis waits for a line end that Postgres's start-up message never sends).
 *
 * Each statement must be answered within `statementTimeoutMs`, or it fails and the
 * connection is dropped (pg-pool destroys a client released with an error).
 *
 * The deadline is the Client's own (`connectionTimeoutMillis`), not the pool's: the
 * pool's would also fail a statement that waits for a free connection of a busy pool.
 */
export function boundedClient(
  url: string,
  timeoutMs: number,
  statementTimeoutMs: number,
  /**
   * Called with the address when a connection has waited for a while (a fifth of the
   * deadline, 2 s at most) without Postgres's answer: what the process waits for, said
   * before the deadline ends it. Once per Client class (a store's pool), not per connection.
   */
  onSlow?: (where: string) => void,
): typeof pg.Client {
  const where = hostOf(url);
  const noticeAfterMs = Math.min(2_000, timeoutMs / 5);
  let told = false;
  return class BoundedClient extends pg.Client {
    constructor(config?: string | pg.ClientConfig) {
      super({
        ...(typeof config === 'string' ? { connectionString: config } : config),
        connectionTimeoutMillis: timeoutMs,
        // The client's own deadline, not statement_timeout: it also ends the wait on a
        // flow that stopped (a paused server, a partition), where the server never
        // answers, and it passes a transaction pooler, which refuses startup options.
        // The pool then drops the connection: its answer may still come, late.
        query_timeout: statementTimeoutMs,
      });
    }

    override connect(): Promise<pg.Client>;
    override connect(callback: ConnectCallback): void;
    override connect(callback?: ConnectCallback): Promise<pg.Client> | undefined {
      const started = performance.now();
      const notice =
        onSlow && !told
          ? setTimeout(() => {
              if (told) return;
              told = true;
              onSlow(where);
            }, noticeAfterMs).unref()
          : undefined;
      const explain = (err: Error): Error =>
        connectFailure(err, where, timeoutMs, performance.now() - started >= timeoutMs);
      if (callback) {
        // pg calls back with (err) or (null, client); the union of the two is what its types allow.
        const call = callback as (err: Error | null, client?: pg.Client) => void;
        super.connect((err: Error | null, client?: pg.Client) => {
          clearTimeout(notice);
          call(err ? explain(err) : null, client);
        });
        return undefined;
      }
      return super
        .connect()
        .catch((err: unknown) => {
          throw explain(err instanceof Error ? err : new Error(String(err)));
        })
        .finally(() => clearTimeout(notice));
    }
  };
}

/**
 * A failed connection as the operator needs it: a refusal from Postgres itself (a
 * password, a database that does not exist: it has a SQLSTATE) and the system's own
 * "refused" or "unknown host" stay as they are; the deadline passed, or a peer that
 * closed or spoke something else before Postgres's answer, name DATABASE_URL.
 */
function connectFailure(err: Error, where: string, timeoutMs: number, timedOut: boolean): Error {
  const e = err as { code?: unknown; severity?: unknown };
  if (typeof e.severity === 'string') return err;
  if (typeof e.code === 'string' && SAID_BY_SYSTEM.has(e.code)) return err;
  if (timedOut) {
    return new FeedsyncError(
      `Postgres at ${where} (DATABASE_URL) did not answer within ${timeoutMs} ms (DATABASE_CONNECT_TIMEOUT_MS): ` +
        'check that DATABASE_URL names a Postgres server, its host and port, and that the server runs',
      { code: 'PG_CONNECT_TIMEOUT', cause: err },
    );
  }
  return new FeedsyncError(
    `Postgres at ${where} (DATABASE_URL): the connection failed before Postgres answered (${err.message}): ` +
      'check that DATABASE_URL names a Postgres server, its host and port, and its sslmode',
    { code: 'PG_CONNECT_FAILED', cause: err },
  );
}

/**
 * Whether nothing that speaks Postgres answered at DATABASE_URL within the deadline: a
 * wrong address more often than a server restarting (which refuses at once).
 */
export function noPostgresThere(err: unknown): boolean {
  return (
    err instanceof FeedsyncError && (err.code === 'PG_CONNECT_TIMEOUT' || err.code === 'PG_CONNECT_FAILED')
  );
}
