import type { Pool, PoolClient, QueryResult } from 'pg';
import { FeedsyncError } from '../errors.js';
import { beginLimited, commit, rollback } from './statements.js';

/** What bounds one of the consumer's transactions. */
export interface TransactionLimits {
  /** Milliseconds the whole transaction may last (and each of its statements, and its idle spells). */
  readonly timeoutMs: number;
  /** Milliseconds a statement waits for a lock. */
  readonly lockTimeoutMs: number;
  /** Cuts the transaction off when it aborts, as the deadline does (close() past its own). */
  readonly signal?: AbortSignal | undefined;
}

/**
 * BEGIN with `limits`, `fn`, COMMIT; ROLLBACK when `fn` throws. `opening`, when given,
 * is a statement of literal values (made with the client's escapeLiteral) sent with BEGIN
 * in its round trip, its result handed to `fn`: a job's transaction is three round trips,
 * not four. Past the deadline (or
 * on `signal`) the transaction is cut off: the error is thrown at once and the client's
 * connection is ended, not returned to the pool, so the server rolls back and a
 * function still holding `db` can write nothing more. A client whose ROLLBACK failed is
 * dropped too.
 */
export async function inTransaction<T>(
  pool: Pool,
  limits: TransactionLimits,
  fn: (db: PoolClient, opened: QueryResult | undefined) => Promise<T>,
  opening?: (db: PoolClient) => string,
): Promise<T> {
  const db = await pool.connect();
  let broken: Error | undefined;
  // A session the server ends (idle_in_transaction_session_timeout after a pause, an
  // operator's pg_terminate_backend) errors on the client it checked out: without a
  // listener that would end the process. The statement in flight fails on its own.
  const onError = (err: Error): void => {
    broken ??= err;
  };
  db.on('error', onError);
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const cutOff = new Promise<never>((_, reject) => {
    const cut = (err: FeedsyncError): void => {
      broken = err;
      reject(err);
    };
    timer = setTimeout(
      () =>
        cut(
          new FeedsyncError(
            `the transaction passed its deadline of ${limits.timeoutMs} ms and was rolled back`,
            {
              code: 'CONSUMER_HANDLER_TIMEOUT',
            },
          ),
        ),
      limits.timeoutMs,
    );
    onAbort = () =>
      cut(
        new FeedsyncError('the consumer closed before the transaction ended: rolled back', {
          code: 'CONSUMER_CLOSED',
        }),
      );
    if (limits.signal?.aborted) onAbort();
    else limits.signal?.addEventListener('abort', onAbort, { once: true });
  });
  try {
    const begin = beginLimited(limits) + (opening ? `; ${opening(db)}` : '');
    // A string of several statements resolves to one result each: the last is `opening`'s.
    const results = (await Promise.race([db.query(begin), cutOff])) as unknown as QueryResult[];
    const work = fn(db, opening ? results.at(-1) : undefined);
    // Cut off, `fn` fails later on the ended connection: nobody waits for it then.
    work.catch(() => {});
    const result = await Promise.race([work, cutOff]);
    await Promise.race([db.query(commit), cutOff]);
    return result;
  } catch (err) {
    if (broken === undefined) {
      await db.query(rollback).catch((rollbackFailed: Error) => {
        broken = rollbackFailed;
      });
    }
    throw err;
  } finally {
    clearTimeout(timer);
    if (onAbort) limits.signal?.removeEventListener('abort', onAbort);
    // A client being ended keeps its listener: the server's own ending of the session
    // (idle_in_transaction_session_timeout) may still arrive while it closes.
    if (broken === undefined) db.off('error', onError);
    db.release(broken);
  }
}
