import type { Logger } from '../logger.js';
import type { leaseHolderOf } from '../store/lease-statements.js';
import type { Outcome } from './scheduler.js';

/** Who holds a source's lease, and until when. */
export type Holder = NonNullable<Awaited<ReturnType<typeof leaseHolderOf>>>;

/** The summary line of one source's turn; `holder`, of a lease held elsewhere. */
export function logOutcome(log: Logger, outcome: Outcome, level: 'info' | 'debug', holder?: Holder): void {
  if (!outcome.ok) {
    const message = outcome.error instanceof Error ? outcome.error.message : String(outcome.error);
    log.error({ source: outcome.source, outcome: 'failed', err: outcome.error }, `source failed: ${message}`);
    return;
  }
  const r = outcome.result;
  const line = {
    source: outcome.source,
    outcome: r.status,
    // A turn does not drain the outbox (the worker does, after its turns): it can only
    // say that the relay failed while it ran. "drained" is said once, by the run's end.
    // A turn stopped by a signal drained nothing, and need not have: no relay failure in that.
    ...(r.drained || r.status === 'stopped' ? {} : { relayFailed: true }),
    stored: r.stored,
    duplicates: r.duplicates,
    quarantined: r.quarantined,
    pages: r.pages,
    cursor: r.cursor,
    durationMs: Math.round(r.durationMs),
  };
  if (r.status === 'held-elsewhere' && holder) {
    const until = holder.expiresAt.toISOString();
    log.info(
      { ...line, holder: holder.holder, leaseExpiresAt: until },
      `${holder.holder} holds the lease of this source until ${until} unless it renews it; skipped ` +
        '(a worker that was killed holds it until then: run again after that)',
    );
  } else if (r.status === 'held-elsewhere')
    log.info(line, 'another worker holds the lease of this source; skipped');
  else if (r.status === 'limit-reached')
    log.warn(
      line,
      'source not caught up: the run reached SYNC_ONCE_MAX_MS before the end of its feed; what it read is ' +
        'stored, and the next run goes on from its cursor',
    );
  else if (!r.drained && r.status !== 'stopped')
    log.warn(line, 'source stored its events; the outbox was not drained');
  else log[level](line, 'source finished');
}
