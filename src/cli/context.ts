import { type Config, loadConfig, secretsOf } from '../config.js';
import { exitCodeOf, FeedsyncError } from '../errors.js';
import { createLogger, type Logger } from '../logger.js';

/** What every command's action gets: the config and logger, made on first use. */
export interface CommandContext {
  readonly config: Config;
  readonly logger: Logger;
}

/**
 * Wraps a command's action: loads the config (exit 2 when it is wrong), makes the
 * logger, runs the action, and turns what it throws into a message and an exit code.
 * The action returns its exit code (default 0).
 */
export function action<A extends unknown[]>(
  fn: (ctx: CommandContext, ...args: A) => Promise<number | undefined> | number | undefined,
): (...args: A) => Promise<void> {
  return async (...args: A) => {
    let logger: Logger | undefined;
    try {
      const config = loadConfig();
      logger = createLogger({ level: config.logLevel, secrets: secretsOf(config) });
      process.exitCode = (await fn({ config, logger }, ...args)) ?? 0;
    } catch (err) {
      process.exitCode = exitCodeOf(err);
      const message = err instanceof FeedsyncError ? err.message : String((err as Error)?.message ?? err);
      // The logger scrubs secrets; stderr gets only our own messages, which never hold one.
      logger?.error({ err }, message);
      process.stderr.write(`feedsync: ${message}\n`);
    } finally {
      logger?.flush();
    }
  };
}
