import { type Logger, pino } from 'pino';
import type { Config } from './config/config-type.js';
import { redactUrl } from './config/connection-url.js';
import { secretsOf } from './config/secrets.js';
import { commandName, frames, shorten } from './error-summary.js';
import { scrubText } from './scrub.js';

export type { Logger };
export { redactUrl };

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
  /** Secret values (API key, webhook secrets, passwords) scrubbed from every line, wherever they appear (scrub.ts). */
  secrets?: readonly string[];
  /** Where lines go; default stdout (pretty-printed when it is a terminal). */
  destination?: NodeJS.WritableStream;
}

/**
 * The one root logger. Modules take `logger.child({ module: '…' })`.
 * Redaction works twice: by key (`redact`), and by value just before a line is
 * written (scrubText), so a secret or an address inside an error message or a URL
 * never reaches the output.
 */
export function createLogger(opts: LoggerOptions = {}): Logger {
  const secrets = opts.secrets ?? [];
  const scrub = (line: string): string => scrubText(line, secrets);
  const level = opts.level ?? 'info';
  const stacks = (pino.levels.values[level] ?? 30) <= pino.levels.values.debug!;
  const destination =
    opts.destination ??
    (process.stdout.isTTY
      ? pino.transport({ target: 'pino-pretty', options: { colorize: true } })
      : process.stdout);
  return pino(
    {
      level,
      redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
      serializers: { err: (err: unknown) => serializeError(err, { stacks }) },
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
const ERROR_FIELDS = [
  'code',
  'redisCode',
  'errno',
  'syscall',
  'address',
  'port',
  'status',
  'serviceCode',
  'exitCode',
];

/**
 * The `err` of a log line: type, message, code, a failed Redis command's name, the
 * stack's frames (with `stacks`: at LOG_LEVEL debug and trace only, since an expected
 * failure is not a bug) and the cause, and nothing else. pino's own serializer copies
 * every field, and an error of ioredis holds the command's arguments (BullMQ's Lua
 * source and the job data, recipients' addresses included) and earlier errors holding the same.
 */
function serializeError(err: unknown, opts: { stacks?: boolean } = {}, depth = 0): Record<string, unknown> {
  if (!(err instanceof Error)) return { message: shorten(String(err)) };
  const out: Record<string, unknown> = { type: err.name, message: shorten(err.message) };
  for (const field of ERROR_FIELDS) {
    const value = (err as unknown as Record<string, unknown>)[field];
    if (typeof value === 'number' || (typeof value === 'string' && value.length <= 100)) out[field] = value;
  }
  const command = commandName(err);
  if (command) out.command = command;
  if (opts.stacks && err.stack) out.stack = `${err.name}: ${out.message}\n${frames(err.stack)}`;
  if (depth < 3) {
    if (err.cause !== undefined) out.cause = serializeError(err.cause, opts, depth + 1);
    // ioredis's "Failed to refresh slots cache" says why only here.
    const lastNodeError = (err as { lastNodeError?: unknown }).lastNodeError;
    if (lastNodeError !== undefined) out.lastNodeError = serializeError(lastNodeError, opts, depth + 1);
    if (err instanceof AggregateError)
      out.errors = err.errors.slice(0, 3).map((e) => serializeError(e, opts, depth + 1));
  }
  return out;
}
