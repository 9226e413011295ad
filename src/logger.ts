import { type Logger, pino } from 'pino';
import { type Config, secretsOf } from './config.js';

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

/** A connection string with its password replaced, safe to print. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = 'REDACTED';
    return u.toString();
  } catch {
    return '[unparseable URL]';
  }
}
