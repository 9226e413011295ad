import type { Config } from '../config/config-type.js';
import { requireService } from '../config/source-config.js';
import { loggerFor } from '../logger.js';
import { runOnceRound } from './worker-once.js';
import { type WorkerOptions, type WorkerParts, type WorkerResult, workerParts } from './worker-parts.js';
import { runWatchRound } from './worker-watch.js';

export type { WorkerHooks, WorkerOptions, WorkerResult } from './worker-parts.js';

/**
 * The main loop of feedsync, the same for `feedsync sync` and for an application that
 * embeds it: every source of the config (FEED_SOURCE, or each of FEED_SOURCES_FILE)
 * over one Postgres pool, one publisher and one outbox relay, at most SYNC_CONCURRENCY
 * turns at a time. `once` runs each source to its feed's end (or SYNC_ONCE_MAX_MS) and
 * hands the outbox over; `watch` claims due sources and serves /metrics until `signal`
 * aborts. It logs, calls its hooks and returns the outcomes; what the run means to a
 * terminal (stderr lines, an exit code, a Pushgateway) is its caller's.
 */
export async function runWorker(config: Config, opts: WorkerOptions): Promise<WorkerResult> {
  const logger = opts.logger ?? loggerFor(config);
  // Without a sources file the one source needs FEED_BASE_URL and a key: a usage error at start.
  if (config.sourcesFile === null) requireService(config);
  const w = workerParts(config, logger, { ...opts, signal: opts.signal ?? new AbortController().signal });
  try {
    return await runRound(w, opts);
  } finally {
    await w.parts.close();
  }
}

/**
 * A round over parts already made: runWorker's, and `createSync().runOnce()`'s once round,
 * which checks the schemas on its first run only (`checked` after that).
 */
export async function runRound(
  w: WorkerParts,
  opts: Pick<WorkerOptions, 'mode' | 'migrate'> & { checked?: boolean },
): Promise<WorkerResult> {
  if (opts.checked !== true) {
    // Once, before any turn starts, so that two turns never migrate at the same time.
    await w.syncOf(w.names[0]!).checkSchema();
    await w.parts.checkQueues({ migrate: opts.migrate === true });
  }
  // Rows an earlier run committed but did not publish: the relay reads them first.
  w.parts.relay.kick();
  return opts.mode === 'watch' ? await runWatchRound(w) : await runOnceRound(w);
}
