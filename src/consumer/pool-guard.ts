import type { Pool } from 'pg';
import type { Logger } from '../logger.js';
import { redacted } from './redacted.js';

/**
 * Keeps the application's pool from ending the process when Postgres drops one of its
 * idle clients (a restart, `pg_terminate_backend`, `idle_session_timeout`): pg emits
 * 'error' on the pool then, and an 'error' with no listener throws. Added only when the
 * application listens to none, so its own handling stays in charge. The pool discards
 * the lost client and opens another when asked; a job whose client is lost mid-way
 * fails and is retried (the checked-out clients have listeners of their own).
 */
export function guardPool(pool: Pool, logger: Logger): void {
  if (pool.listenerCount('error') > 0) return;
  pool.on('error', (err) =>
    logger.warn(
      { err: redacted(err) },
      'an idle connection of the pool was lost; the pool opens another when a job needs one',
    ),
  );
  // A new client is handed over inside the read that brought its ReadyForQuery: a FATAL in
  // that same read (the session ended at that instant) is emitted before the job that
  // asked for it can listen, and pg-pool's own listener is already gone. This one takes
  // it; the job's first statement then fails, and the job is retried.
  pool.on('connect', (client) => client.on('error', () => {}));
}
