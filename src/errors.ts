import type { ErrorCode } from './error-codes.js';

export type { ErrorCode } from './error-codes.js';

/**
 * The few error classes feedsync throws. Each has a stable `code` for scripts and
 * an `exitCode` for the CLI; wrapping keeps the original under `cause`.
 * None of them ever carries the API key or a secret in its message.
 */
export class FeedsyncError extends Error {
  readonly code: ErrorCode;
  readonly exitCode: number;

  constructor(message: string, opts: { code: ErrorCode; exitCode?: number; cause?: unknown }) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.code = opts.code;
    this.exitCode = opts.exitCode ?? 1;
  }
}

/** Bad configuration or usage: the program stops at start (exit 2). */
export class ConfigError extends FeedsyncError {
  constructor(message: string, code: ErrorCode = 'CONFIG_INVALID') {
    super(message, { code, exitCode: 2 });
  }
}

/** A non-2xx answer from the service, or a request that never got one. */
export class ApiError extends FeedsyncError {
  /** HTTP status, or 0 when no answer arrived (network error, timeout). */
  readonly status: number;
  /** The service's own error code and message, when it sent them. */
  readonly serviceCode: string | undefined;
  readonly serviceMessage: string | undefined;

  constructor(
    message: string,
    opts: {
      code: ErrorCode;
      status: number;
      serviceCode?: string | undefined;
      serviceMessage?: string | undefined;
      cause?: unknown;
      exitCode?: number;
    },
  ) {
    super(message, { code: opts.code, exitCode: opts.exitCode ?? 1, cause: opts.cause });
    this.status = opts.status;
    this.serviceCode = opts.serviceCode;
    this.serviceMessage = opts.serviceMessage;
  }
}

/** 401 or 403: the service rejected the key. Never retried (exit 3). */
export class AuthError extends ApiError {
  constructor(status: number, serviceMessage?: string) {
    super(`the service rejected the API key (HTTP ${status})`, {
      code: 'UNAUTHORIZED',
      status,
      serviceMessage,
      exitCode: 3,
    });
  }
}

/** A feed page that breaks the rules (not JSON, no list, too many events, too big). */
export class PageError extends FeedsyncError {
  constructor(message: string, code: ErrorCode, cause?: unknown) {
    super(message, { code, cause });
  }
}

/** The exit code a CLI command ends with for an error thrown out of it. */
export function exitCodeOf(err: unknown): number {
  return err instanceof FeedsyncError ? err.exitCode : 1;
}

/**
 * A Redis command or connection that failed, told by message, code and command name
 * only. The errors of ioredis carry the command's arguments (BullMQ's Lua source and
 * the job data, recipients' addresses included), which must reach no log or output.
 */
export class RedisError extends FeedsyncError {
  /** The command's name (`evalsha`, `info`…), never its arguments; null for a connection failure. */
  readonly command: string | null;
  /**
   * Redis's own error code (`OOM`, `READONLY`, `NOREPLICAS`…) or the socket's
   * (`ECONNREFUSED`…), passed through as Redis said it; null for feedsync's own.
   */
  readonly redisCode: string | null;

  constructor(message: string, opts: { code: ErrorCode; command: string | null; redisCode?: string }) {
    super(message, { code: opts.code });
    this.command = opts.command;
    this.redisCode = opts.redisCode ?? null;
  }
}

/**
 * A listen() that failed, as an error that names the variables to change:
 * a port in use (exit 1), an address that is not this machine's or a port it
 * may not take (exit 2). Anything else is returned as it was.
 */
export function listenFailure(
  err: unknown,
  at: { portVar: string; hostVar: string; host: string; port: number },
): unknown {
  const code = (err as { code?: unknown } | null)?.code;
  const where = `${at.host.includes(':') ? `[${at.host}]` : at.host}:${at.port}`;
  if (code === 'EADDRINUSE') {
    return new FeedsyncError(
      `${at.portVar} ${at.port} is already in use (${where}): stop what listens there or choose another ${at.portVar}`,
      { code: 'PORT_IN_USE', cause: err },
    );
  }
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
    return new ConfigError(
      `${at.hostVar} ${at.host} is not an address of this machine (${String(code)}); leave it unset to listen on every interface`,
      'BAD_LISTEN_ADDRESS',
    );
  }
  if (code === 'EACCES') {
    return new ConfigError(
      `${at.portVar} ${at.port}: this user may not listen there (ports below 1024 need privileges)`,
      'BAD_LISTEN_ADDRESS',
    );
  }
  return err;
}
