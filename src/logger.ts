import { type Logger, pino } from 'pino';
import { redactUrl, redactUrlsInText } from './connection-url.js';

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
  const secrets = opts.secrets ?? [];
  const scrub = (line: string): string => scrubSecrets(line, secrets);
  const level = opts.level ?? 'info';
  const destination =
    opts.destination ??
    (process.stdout.isTTY
      ? pino.transport({ target: 'pino-pretty', options: { colorize: true } })
      : process.stdout);
  return pino(
    {
      level,
      serializers: { err: errorSerializer(pino.levels.values[level] ?? 30) },
      redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
      hooks: { streamWrite: scrub },
      base: { pid: process.pid },
    },
    destination as pino.DestinationStream,
  );
}

/** Text with every secret value, and any password in a URL, replaced by [REDACTED]. */
export function scrubSecrets(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) if (s.length > 0 && out.includes(s)) out = out.split(s).join('[REDACTED]');
  return redactUrlsInText(out);
}

/** Stack traces go to the logs at debug and trace only: at info an error is its message, code and fields. */
function errorSerializer(levelValue: number): (err: unknown) => unknown {
  const withStacks = levelValue <= pino.levels.values.debug!;
  const serialize = pino.stdSerializers.err;
  const strip = (value: unknown): unknown => {
    if (typeof value !== 'object' || value === null) return value;
    const out = value as { stack?: unknown; aggregateErrors?: unknown[] };
    delete out.stack;
    out.aggregateErrors?.forEach(strip);
    return out;
  };
  return (err) => (withStacks ? serialize(err as Error) : strip(serialize(err as Error)));
}
