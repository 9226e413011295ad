import type { Pool } from 'pg';
import type { Logger } from '../logger.js';
import { CONSUMER_DEFAULTS } from './defaults.js';
import { withoutAddresses } from './events.js';
import { pruneInbox } from './inbox.js';

export interface PruningOptions {
  pool: Pool;
  schema: string;
  name: string;
  /** Rows older than this are deleted. */
  hours: number;
  /** Bound each batch's transaction, as a job's. */
  timeoutMs: number;
  lockTimeoutMs: number;
  logger: Logger;
  /** Rows a batch deletes at most. Default CONSUMER_DEFAULTS.pruneBatch. */
  batch?: number;
  /** Milliseconds from start to the first round. Default CONSUMER_DEFAULTS.pruneFirstAfterMs. */
  firstAfterMs?: number;
}

/**
 * Prunes the consumer's inbox rows older than `hours` on a timer until the returned
 * stop() (which waits for a round in flight). A round deletes batch after batch, each a
 * short transaction, until none is left that old: however many rows a day the queues
 * carry, a round ends with the table holding only what retention keeps. The timer does
 * not keep the process alive; a failed round is logged and the next one tries again.
 */
export function startPruning(opts: PruningOptions): () => Promise<void> {
  const batch = opts.batch ?? CONSUMER_DEFAULTS.pruneBatch;
  let stopped = false;
  let round: Promise<void> = Promise.resolve();
  const prune = async (): Promise<void> => {
    let deleted = 0;
    let batches = 0;
    for (let n = batch; n === batch && !stopped; batches++) {
      n = await pruneInbox(opts.pool, { ...opts, batch });
      deleted += n;
    }
    if (deleted > 0) opts.logger.info({ deleted, batches, olderThanHours: opts.hours }, 'inbox pruned');
  };
  const tick = (): void => {
    round = prune().catch((err: unknown) =>
      opts.logger.warn(
        { err: { message: withoutAddresses(String((err as Error)?.message ?? err)) } },
        'inbox pruning failed',
      ),
    );
    void round.then(() => {
      if (!stopped) timer = setTimeout(tick, CONSUMER_DEFAULTS.pruneEveryMs).unref();
    });
  };
  let timer = setTimeout(tick, opts.firstAfterMs ?? CONSUMER_DEFAULTS.pruneFirstAfterMs).unref();
  return async () => {
    stopped = true;
    clearTimeout(timer);
    await round;
  };
}
