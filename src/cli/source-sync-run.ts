import type { Config } from '../config/config-type.js';
import type { Logger } from '../logger.js';
import type { Sync } from '../sync/sync.js';
import { knownSourceConfig } from './known-source.js';
import { launchedByNpm } from './launched-by-npm.js';
import { progressReporter } from './progress.js';
import { shutdownSignal } from './shutdown.js';

/**
 * A command's one run over a source's feed (reconcile, verify): the source a `--source`
 * names (known-source.ts), a progress line on a terminal (ended before the caller prints
 * its result), SIGTERM as the run's signal, and the sync closed at the end, whatever
 * happens.
 */
export async function withSourceSync<T>(
  { config, logger }: { config: Config; logger: Logger },
  source: string | undefined,
  run: (sync: Sync, signal: AbortSignal) => Promise<T>,
): Promise<T> {
  // Loaded here, not at the top: `--help` and the other commands start without it.
  const { createSync } = await import('../sync/sync.js');
  const shutdown = shutdownSignal(logger, process.exit, undefined, launchedByNpm());
  const progress = progressReporter();
  const sync = createSync(await knownSourceConfig(config, logger, source), {
    logger,
    hooks: { onCommit: progress.onCommit },
  });
  try {
    const result = await run(sync, shutdown.signal);
    progress.done();
    return result;
  } finally {
    await sync.close();
    shutdown.dispose();
  }
}
