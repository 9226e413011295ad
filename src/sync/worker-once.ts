import { ConfigError } from '../errors.js';
import { takeLease } from '../store/lease.js';
import { ensureLeaseRows, leaseHolderOf } from '../store/lease-statements.js';
import { pruneRound } from '../store/retention-loop.js';
import { type Outcome, runEachOnce, turnFailed } from './scheduler.js';
import { type Holder, logOutcome } from './turn-log.js';
import type { WorkerParts, WorkerResult } from './worker-parts.js';

/**
 * A once run (a CronJob's): every source once, at most SYNC_CONCURRENCY at a time, each
 * under its lease whatever its due time; then the outbox handed over and pruned, once a
 * run, not once a source, and the run's summary line.
 */
export async function runOnceRound(w: WorkerParts): Promise<WorkerResult> {
  const { settings, log, names, signal, limit, hooks } = w;
  const { store, relay } = w.parts;
  const started = performance.now();
  await ensureLeaseRows(store, names);
  // Who holds a source this run skipped, and until when: wait for it, rather than look for a second worker.
  const heldBy = new Map<string, Holder>();
  const turns = await runEachOnce({
    concurrency: settings.concurrency,
    signal,
    turn: w.turn,
    intervalMs: settings.intervalMs,
    describe: w.describe,
    accounts: w.accounts,
    ...(limit ? { limit } : {}),
    sources: names,
    take: async (source) => {
      const taken = await takeLease(store, source, settings.lease);
      const holder = taken ? null : await leaseHolderOf(store, source);
      if (holder) heldBy.set(source, holder);
      return taken;
    },
    onOutcome: (outcome) => {
      w.observe(outcome);
      logOutcome(log, outcome, 'info', heldBy.get(outcome.source));
      hooks.onOutcome?.(outcome);
    },
  });
  hooks.onTurnsDone?.();
  // Rows an earlier run left unpublished are this run's to hand over too, even when every
  // source was leased elsewhere. A run stopped by the signal leaves them to the next.
  let handedOver = true;
  let handOverError: unknown = null;
  if (!signal.aborted) {
    try {
      await relay.drain();
      await pruneRound({
        store,
        logger: w.logger,
        days: settings.eventsRetentionDays,
        outboxHours: settings.outboxRetentionHours,
        signal,
      });
    } catch (err) {
      // A configuration Redis refuses (a cluster, a prefix without a hash tag) is the
      // run's failure, not a Redis outage: exit 2 with the fix.
      if (err instanceof ConfigError) throw err;
      handedOver = false;
      handOverError = err;
      log.error({ err }, 'the outbox could not be drained; the events are stored and the next run drains it');
    }
  }
  // The round's drain published every row the turns committed: a relay failure a turn saw
  // at its end (perhaps one left from before it began) kept no job back.
  const outcomes = handedOver && !signal.aborted ? turns.map(drainedTurn) : turns;
  const reached = new Set(outcomes.map((o) => o.source));
  const turnError = outcomes.find((o) => o.ok && o.result.drainError !== undefined);
  const result: WorkerResult = {
    outcomes,
    handedOver,
    handOverError: handOverError ?? (turnError?.ok ? turnError.result.drainError : relay.lastError),
    // Stopped by its own limit, not by the signal: a source read short of its end, or not started.
    stoppedShort:
      outcomes.some((o) => o.ok && o.result.status === 'limit-reached') ||
      (limit?.aborted === true && !signal.aborted && reached.size < names.length),
    registry: w.metrics.registry,
  };
  await hooks.onRunEnd?.(result);
  for (const source of names) {
    if (!reached.has(source)) log.info({ source, outcome: 'not-started' }, 'source not started: stopping');
  }
  const only = settings.fromFile ? undefined : outcomes[0];
  const durationMs = Math.round(performance.now() - started);
  log.info(
    {
      ...(await w.metrics.summary()),
      ...tally(outcomes, names.length),
      ...(only?.ok ? { status: only.result.status, cursor: only.result.cursor } : {}),
      drained:
        handedOver && !outcomes.some((o) => o.ok && !o.result.drained && o.result.status !== 'stopped'),
      durationMs,
    },
    'sync run finished',
  );
  return result;
}

/** A turn whose jobs the round's drain handed over: drained, whatever the relay said at its end. */
function drainedTurn(outcome: Outcome): Outcome {
  if (!outcome.ok || outcome.result.status === 'stopped' || outcome.result.drained) return outcome;
  const { drainError: _handedOver, ...result } = outcome.result;
  return { ...outcome, result: { ...result, drained: true } };
}

function tally(outcomes: readonly Outcome[], total: number): Record<string, number> {
  const count = (pick: (o: Outcome) => boolean): number => outcomes.filter(pick).length;
  return {
    sources: total,
    caught_up: count((o) => o.ok && o.result.status === 'caught-up' && o.result.drained),
    locked_elsewhere: count((o) => o.ok && o.result.status === 'held-elsewhere'),
    lease_lost: count((o) => o.ok && o.result.status === 'lease-lost'),
    not_caught_up: count((o) => o.ok && o.result.status === 'limit-reached'),
    failed: count(turnFailed),
    not_started: total - outcomes.length,
  };
}
