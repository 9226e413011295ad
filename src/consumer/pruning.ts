import type { Pool } from 'pg';
import type { Logger } from '../logger.js';
import { withoutAddresses } from './events.js';
import { pruneInbox } from './inbox.js';

/** Rows a prune statement deletes at most: a short statement that never holds many locks. */
const BATCH = 1_000;
/** Batches a round deletes at most, back to back; the rest waits for the next round. */
const BATCHES_PER_ROUND = 20;
/** A round every hour; the first soon after start, so a consumer restarted often still prunes. */
const EVERY_MS = 3_600_000;
const FIRST_AFTER_MS = 60_000;

/**
 * Prunes the consumer's inbox rows older than `hours` on a timer, in bounded batches,
 * until the returned stop() (which waits for a round in flight). The timer does not
 * keep the process alive; a failed round is logged and the next one tries again.
 */
export function startPruning(opts: {
  pool: Pool;
  schema: string;
  name: string;
  hours: number;
  timeoutMs: number;
  lockTimeoutMs: number;
  logger: Logger;
}): () => Promise<void> {
  let stopped = false;
  let round: Promise<void> = Promise.resolve();
  const prune = async (): Promise<void> => {
    let deleted = 0;
    for (let i = 0; i < BATCHES_PER_ROUND && !stopped; i++) {
      const n = await pruneInbox(opts.pool, { ...opts, batch: BATCH });
      deleted += n;
      if (n < BATCH) break;
    }
    if (deleted > 0) opts.logger.info({ deleted, olderThanHours: opts.hours }, 'inbox pruned');
  };
  const tick = (): void => {
    round = prune().catch((err: unknown) =>
      opts.logger.warn(
        { err: { message: withoutAddresses(String((err as Error)?.message ?? err)) } },
        'inbox pruning failed',
      ),
    );
    void round.then(() => {
      if (!stopped) timer = setTimeout(tick, EVERY_MS).unref();
    });
  };
  let timer = setTimeout(tick, FIRST_AFTER_MS).unref();
  return async () => {
    stopped = true;
    clearTimeout(timer);
    await round;
  };
}
