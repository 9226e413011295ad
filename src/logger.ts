import { type Logger, pino } from 'pino';
import { type Config, secretsOf } from './config.js';
import { commandName, frames, shorten } from './error-summary.js';

export type { Logger };

/** Keys whose values are replaced wherever they appear in a log object. */
const REDACT_PATHS = [
  'apiKey',
  'api_key',
  'secret',
  'secrets',
  'signing_secret',
  'password',
  'authorization',
  'headers.authorization',
  '*.apiKey',
  '*.secret',
  '*.signing_secret',
  '*.password',
  '*.authorization',
];

export interface LoggerOptions {
  level?: string;
  /** Secret values (API key, webhook secrets, passwords) scrubbed from every line, wherever they appear. */
  secrets?: readonly string[];
  /** Where lines go; default stdout (pretty-printed when it is a terminal). */
  destination?: NodeJS.WritableStream;
}

/**
 * The one root logger. Modules take `logger.child({ module: '…' })`.
 * Redaction works twice: by key (`redact`), and by value just before a line is
 * written, so a secret inside an error message or a URL never reaches the output.
 */
export function createLogger(opts: LoggerOptions = {}): Logger {
  const secrets = [...new Set(opts.secrets ?? [])].filter((s) => s.length > 0);
  const scrub = (line: string): string => {
    let out = line;
    for (const s of secrets) if (out.includes(s)) out = out.split(s).join('[REDACTED]');
    return out.replace(/(\b[a-z][a-z0-9+.-]*:\/\/[^:/@\s"]*:)[^@\s"]+@/gi, '$1[REDACTED]@');
  };
  const destination =
    opts.destination ??
    (process.stdout.isTTY
      ? pino.transport({ target: 'pino-pretty', options: { colorize: true } })
      : process.stdout);
  return pino(
    {
      level: opts.level ?? 'info',
      redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
      serializers: { err: serializeError },
      hooks: { streamWrite: scrub },
      base: { pid: process.pid },
    },
    destination as pino.DestinationStream,
  );
}

/**
 * The logger an embedding gets when it passes none: LOG_LEVEL from the config, the
 * config's secrets scrubbed, lines on stdout.
 */
export function loggerFor(config: Config): Logger {
  return createLogger({ level: config.logLevel, secrets: secretsOf(config) });
}

/** Fields of an error kept in a log line when they hold a number or a short string. */
const ERROR_FIELDS = ['code', 'errno', 'syscall', 'address', 'port', 'status', 'serviceCode', 'exitCode'];

/**
 * The `err` of a log line: type, message, code, a failed Redis command's name, the
 * stack's frames and the cause, and nothing else. pino's own serializer copies every
 * field, and an error of ioredis holds the command's arguments (BullMQ's Lua source
 * and the job data, recipients' addresses included) and earlier errors holding the same.
 */
export function serializeError(err: unknown, depth = 0): Record<string, unknown> {
  if (!(err instanceof Error)) return { message: shorten(String(err)) };
  const out: Record<string, unknown> = { type: err.name, message: shorten(err.message) };
  for (const field of ERROR_FIELDS) {
    const value = (err as unknown as Record<string, unknown>)[field];
    if (typeof value === 'number' || (typeof value === 'string' && value.length <= 100)) out[field] = value;
  }
  const command = commandName(err);
  if (command) out.command = command;
  if (err.stack) out.stack = `${err.name}: ${out.message}\n${frames(err.stack)}`;
  if (depth < 3) {
    if (err.cause !== undefined) out.cause = serializeError(err.cause, depth + 1);
    // ioredis's "Failed to refresh slots cache" says why only here.
    const lastNodeError = (err as { lastNodeError?: unknown }).lastNodeError;
    if (lastNodeError !== undefined) out.lastNodeError = serializeError(lastNodeError, depth + 1);
    if (err instanceof AggregateError)
      out.errors = err.errors.slice(0, 3).map((e) => serializeError(e, depth + 1));
  }
  return out;
}

/** A connection string (or a comma-separated list of them) with its password replaced, safe to print. */
export function redactUrl(url: string): string {
  if (url.includes(','))
    return url
      .split(',')
      .map((u) => redactUrl(u.trim()))
      .join(',');
  try {
    const u = new URL(url);
    if (u.password) u.password = 'REDACTED';
    return u.toString();
  } catch {
    return '[unparseable URL]';
  }
}
