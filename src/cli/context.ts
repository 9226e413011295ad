import { loadConfig } from '../config/config.js';
import type { Config } from '../config/config-type.js';
import { secretsOf } from '../config/secrets.js';
import { ConfigError, exitCodeOf } from '../errors.js';
import { createLogger, type Logger } from '../logger.js';
import { scrubText } from '../scrub.js';
import { describeFailure } from './failure.js';

/** What every command's action gets: the config and logger, made on first use. */
export interface CommandContext {
  readonly config: Config;
  readonly logger: Logger;
}

/**
 * Wraps a command's action: loads the config (exit 2 when it is wrong), makes the
 * logger, runs the action, and turns what it throws into one line on stderr and an
 * exit code. The stack trace goes to the log at LOG_LEVEL=debug only: an expected
 * failure (a refused key, a server down) is not a bug. The action returns its exit
 * code (default 0).
 */
export function action<A extends unknown[]>(
  fn: (ctx: CommandContext, ...args: A) => Promise<number | undefined> | number | undefined,
  /**
   * Where log lines go. Default stdout; a command whose stdout is its answer to a person
   * (`migrate`) logs to stderr, so that each stream carries one kind of line.
   */
  opts: {
    logTo?: NodeJS.WritableStream;
    /**
     * False for a command that never calls the service (status, migrate): the key files
     * of FEED_SOURCES_FILE are left unread, one file a source at a fleet's size.
     */
    keys?: boolean;
  } = {},
): (...args: A) => Promise<void> {
  return async (...args: A) => {
    let logger: Logger | undefined;
    let config: Config | null = null;
    let stopTracing: (() => Promise<void>) | null = null;
    try {
      config = loadConfig(process.env, undefined, {
        ...(opts.keys === false ? { keys: false } : {}),
        warn: (warning) => process.stderr.write(`feedsync: warning: ${warning}\n`),
      });
      logger = createLogger({
        level: config.logLevel,
        secrets: secretsOf(config),
        ...(opts.logTo ? { destination: opts.logTo } : {}),
      });
      // The SDK loads only when an OTLP endpoint is set: without one, spans are the API's no-op.
      if (config.tracing) stopTracing = (await import('../tracing/start.js')).startTracing(config.tracing);
      process.exitCode = (await fn({ config, logger }, ...args)) ?? 0;
    } catch (err) {
      process.exitCode = exitCodeOf(err);
      // A driver's or the service's message is not ours: scrub it as the logger scrubs its
      // lines. A usage or configuration error quotes what was typed, addresses included.
      const line = scrubText(describeFailure(err, config), config ? secretsOf(config) : [], {
        addresses: !(err instanceof ConfigError),
      });
      logger?.debug({ err }, line);
      process.stderr.write(`feedsync: ${line}\n`);
    } finally {
      await stopTracing?.();
      logger?.flush();
    }
  };
}
