import { setFlagsFromString } from 'node:v8';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import { runSources } from './run-sources.js';

/**
 * V8 lets the old generation grow to four times what survived the last full
 * collection before collecting again; during a catch-up that is what pushes the
 * worker's RSS past 200 MB. Growing it by half keeps the peak near 150 MB at no
 * measurable cost in rate (docs/BENCHMARKS.md, Memory).
 */
const HEAP_GROWING_FLAG = '--heap-growing-percent=50';

/**
 * `feedsync sync`: one run (--once) or the loop (--watch), over the sources of
 * FEED_SOURCES_FILE or the one of FEED_SOURCE, by the same scheduler. Returns the exit code.
 */
export async function runSync(
  config: Config,
  logger: Logger,
  opts: { watch: boolean; migrate: boolean },
): Promise<number> {
  setFlagsFromString(HEAP_GROWING_FLAG);
  return runSources(config, logger, opts);
}
