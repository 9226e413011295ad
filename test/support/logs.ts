import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../src/logger.js';

/**
 * A logger whose lines are kept in memory, so a test can grep them for secrets.
 * `secrets` are scrubbed as the CLI's logger would scrub them.
 */
export function captureLogger(opts: { secrets?: readonly string[]; level?: string } = {}): {
  logger: Logger;
  text: () => string;
} {
  const lines: string[] = [];
  const logger = createLogger({
    level: opts.level ?? 'debug',
    secrets: opts.secrets ?? [],
    destination: new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    }),
  });
  return { logger, text: () => lines.join('') };
}
