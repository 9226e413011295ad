import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import { runSources } from './run-sources.js';

/**
 * `feedsync sync`: one run (--once) or the loop (--watch), over the sources of
 * FEED_SOURCES_FILE or the one of FEED_SOURCE, by the same scheduler. Returns the exit code.
 */
export async function runSync(
  config: Config,
  logger: Logger,
  opts: { watch: boolean; migrate: boolean },
): Promise<number> {
  return runSources(config, logger, opts);
}
