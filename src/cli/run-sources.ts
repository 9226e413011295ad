import { composeParts } from '../compose/parts.js';
import { type Config, configForSource, requireService } from '../config/config.js';
import { ConfigError, exitCodeOf } from '../errors.js';
import type { Logger } from '../logger.js';
import { dbGauges } from '../metrics/db-gauges.js';
import { createMetrics } from '../metrics/metrics.js';
import { pushMetrics } from '../metrics/push.js';
import { startWorkerHealth } from '../metrics/worker-health.js';
import { ensureLeaseRows, leaseHolderOf, nextDueInMs, takeLease } from '../store/lease.js';
import { pruneRound, startRetentionLoop } from '../store/retention-loop.js';
import { startFleetClaims } from '../sync/fleet-claims.js';
import { type Outcome, runEachOnce, type Turn, watchSources } from '../sync/scheduler.js';
import {
  applierFor,
  createSourceSync,
  feedOf,
  runFailed,
  type SourceSync,
  type SyncHooks,
  sourceSettings,
} from '../sync/sync.js';
import { describeFailure } from './failure.js';
import { handOverFailure } from './hand-over.js';
import { progressReporter } from './progress.js';
import { shutdownSignal } from './shutdown.js';

/**
 * `feedsync sync`, for the one source of FEED_SOURCE and for a sources file alike (a
 * list of one is a list): one Postgres pool, one publisher and one outbox relay shared
 * by the turns, which the scheduler runs at most SYNC_CONCURRENCY at a time. A turn
 * runs over those shared parts with a feed client of its own, closed at its end, so
 * memory and sockets follow SYNC_CONCURRENCY, not the number of sources. Returns the
 * exit code.
 */
export async function runSources(
  config: Config,
  logger: Logger,
  opts: { watch: boolean; migrate: boolean },
): Promise<number> {
  const log = logger.child({ module: 'cli' });
  // The per-worker rounds of a watch (lease rows, the outbox's sweep): once an interval, between 1 and 60 s.
  const upkeepMs = Math.min(60_000, Math.max(1_000, config.syncIntervalMs));
  const names = config.sources.map((s) => s.source);
  // Without a sources file the one source needs FEED_BASE_URL and a key: a usage error at start.
  if (config.sourcesFile === null) requireService(config);
  const shutdown = shutdownSignal(logger);
  const progress = opts.watch ? null : progressReporter();
  const parts = composeParts(config, logger, {
    // Per turn in flight, one connection for its commits; then the relay's, and one for
    // claims, renewals, gauges and the schema check. No connection holds a source.
    poolMax: config.syncConcurrency + 2,
    stopping: shutdown.signal,
    // Called once the relay publishes, by which time the metrics below exist.
    relay: {
      onPublished: (queue, count) => metrics.onPublished(queue, count),
      onPublishDelay: (seconds) => metrics.onPublishDelay(seconds),
      // A watch's turns leave the outbox to the relay: it reads it on this timer for rows
      // nobody offers (a failed publication, a worker that died), about once an interval.
      ...(opts.watch ? { sweepMs: upkeepMs } : {}),
    },
  });
  // The metrics read their gauges from the parts' store; the relay, made on first use, counts into them.
  const metrics = createMetrics(dbGauges(parts.store, names, config.syncIntervalMs), names);
  const { store, publisher, relay } = parts;
  const applier = applierFor(config, store);
  let lastBeat = Date.now();
  const beat = (): void => {
    lastBeat = Date.now();
  };
  const { lease } = sourceSettings(config);
  // A once run's own end, well inside a CronJob's activeDeadlineSeconds: the turns in
  // flight commit what they fetched, and the next run goes on from their cursors.
  const limit = opts.watch ? undefined : AbortSignal.timeout(config.syncOnceMaxMs);
  const keyProblems = new Map(
    config.sources.flatMap((s) => (s.keyProblem ? [[s.source, s.keyProblem]] : [])),
  );
  const hooksFor = (source: string): SyncHooks => {
    const hooks = metrics.hooksFor(source);
    return {
      ...hooks,
      onCommit: (info) => {
        progress?.onCommit(info);
        hooks.onCommit(info);
        beat();
      },
      onRetry: () => {
        hooks.onRetry();
        beat();
      },
    };
  };
  /** The runs of one source over the shared parts; its feed client lives for one turn. */
  const syncOf = (source: string): SourceSync => {
    const own = configForSource(config, source);
    const hooks = hooksFor(source);
    const log = logger.child({ source });
    return createSourceSync({
      settings: sourceSettings(own),
      store,
      relay,
      applier,
      openFeed: feedOf(own, log, hooks),
      logger: log,
      hooks,
      autoMigrate: opts.migrate,
    });
  };
  const turn: Turn = async (held, signal) => {
    const problem = keyProblems.get(held.source);
    // The source is named by whoever prints this: the stderr line's prefix, the log line's field, status's row.
    if (problem)
      throw new ConfigError(`${problem}; this source fails every turn until it is fixed`, 'KEY_FILE');
    return syncOf(held.source).runHeld(held, signal, limit);
  };
  const describe = (err: unknown): string => describeFailure(err, config);
  const observe = (outcome: Outcome): void => {
    if (outcome.ok)
      metrics.observeRun(outcome.source, { ...outcome.result, failed: runFailed(outcome.result) });
    else metrics.observeFailure(outcome.source);
  };

  try {
    // Once, before any turn starts, so that two turns never migrate at the same time.
    await syncOf(names[0]!).checkSchema();
    // Rows an earlier run committed but did not publish: the relay reads them first.
    relay.kick();
    const scheduled = {
      concurrency: config.syncConcurrency,
      signal: shutdown.signal,
      turn,
      intervalMs: config.syncIntervalMs,
      describe,
    };
    if (!opts.watch) {
      const started = performance.now();
      await ensureLeaseRows(store, names);
      // Who holds a source this run skipped, and until when: wait for it, rather than look for a second worker.
      const heldBy = new Map<string, Holder>();
      const outcomes = await runEachOnce({
        ...scheduled,
        ...(limit ? { limit } : {}),
        sources: names,
        take: async (source) => {
          const taken = await takeLease(store, source, lease);
          const holder = taken ? null : await leaseHolderOf(store, source);
          if (holder) heldBy.set(source, holder);
          return taken;
        },
        onOutcome: (outcome) => {
          observe(outcome);
          logOutcome(log, outcome, 'info', heldBy.get(outcome.source));
        },
      });
      progress?.done();
      // Rows an earlier run left unpublished are this run's to hand over too, even when every
      // source was leased elsewhere. A run stopped by SIGTERM leaves them to the next.
      let handedOver = true;
      let handOverError: unknown = null;
      if (!shutdown.signal.aborted) {
        try {
          await relay.drain();
          // Pruning once a run, not once a source.
          await pruneRound({
            store,
            logger,
            days: config.eventsRetentionDays,
            outboxHours: config.queues.outboxRetentionHours,
            signal: shutdown.signal,
          });
        } catch (err) {
          // A configuration Redis refuses (a cluster, a prefix without a hash tag) is the
          // run's failure, not a Redis outage: exit 2 with the fix.
          if (err instanceof ConfigError) throw err;
          handedOver = false;
          handOverError = err;
          log.error(
            { err },
            'the outbox could not be drained; the events are stored and the next run drains it',
          );
        }
      }
      const only = config.sourcesFile === null ? outcomes[0] : undefined;
      // A run that found its one source leased elsewhere did nothing worth reporting.
      if (config.pushgatewayUrl && !(only?.ok && only.result.status === 'locked')) {
        const group = config.sourcesFile === null ? { source: config.feed.source } : {};
        await pushMetrics(config.pushgatewayUrl, metrics.registry, group, log);
      }
      const reached = new Set(outcomes.map((o) => o.source));
      for (const source of names) {
        if (!reached.has(source))
          log.info({ source, outcome: 'not-started' }, 'source not started: stopping');
      }
      // Stopped by its own limit, not by SIGTERM: a source read short of its end, or not started.
      const short =
        outcomes.some((o) => o.ok && o.result.status === 'limit-reached') ||
        (limit?.aborted === true && !shutdown.signal.aborted && reached.size < names.length);
      const durationMs = Math.round(performance.now() - started);
      log.info(
        {
          ...(await metrics.summary()),
          ...tally(outcomes, names.length),
          ...(only?.ok ? { status: only.result.status, cursor: only.result.cursor } : {}),
          durationMs,
        },
        'sync run finished',
      );
      const turnError = outcomes.find((o) => o.ok && o.result.drainError !== undefined);
      const why = handOverError ?? (turnError?.ok ? turnError.result.drainError : relay.lastError);
      tellOperator(config, outcomes, describe, handedOver, why);
      if (short) tellLimit(config, outcomes, names.length - reached.size);
      const code = exitCodeFor(outcomes);
      if (code === 0 && !handedOver) return 1;
      return code === 0 && short ? EXIT_NOT_CAUGHT_UP : code;
    }

    const health = await startWorkerHealth({
      config,
      registry: metrics.registry,
      logger,
      store,
      publisher,
      lastBeat: () => lastBeat,
    });
    log.info(
      {
        host: config.metricsHost,
        port: health.port,
        intervalMs: config.syncIntervalMs,
        leaseMs: config.sourceLeaseMs,
        sources: names.length,
        holder: lease.holder,
      },
      'watching the feeds',
    );
    const claims = await startFleetClaims({ store, sources: names, lease, everyMs: upkeepMs, logger });
    // Pruning once a minute a replica, not once a turn.
    const retention = startRetentionLoop({
      store,
      logger,
      days: config.eventsRetentionDays,
      outboxHours: config.queues.outboxRetentionHours,
      intervalMs: 60_000,
    });
    // A source that a once run (or another worker) ran moments ago is due an interval after
    // that turn, and quiet turns log at debug: say why nothing happens meanwhile.
    const firstDueMs = await nextDueInMs(store, Number.MAX_SAFE_INTEGER);
    if (firstDueMs > 0) {
      log.info(
        { nextDueInMs: firstDueMs },
        `no source is due yet: the next is due in ${(firstDueMs / 1000).toFixed(1)} s, SYNC_INTERVAL_MS after ` +
          'its last turn (a once run counts); turns that find nothing new log at debug',
      );
    }
    try {
      await watchSources({
        ...scheduled,
        claim: (limit) => claims.claim(limit),
        logger,
        onBeat: beat,
        onOutcome: (outcome) => {
          observe(outcome);
          if (outcome.ok) logOutcome(log, outcome, outcome.result.stored > 0 ? 'info' : 'debug');
          else logOutcome(log, outcome, 'info');
        },
      });
    } finally {
      await claims.stop();
      await retention.stop();
      await health.close();
    }
    return 0;
  } finally {
    progress?.done();
    await parts.close();
    shutdown.dispose();
  }
}

/** A turn that failed: it threw, or its events are stored but the outbox could not be drained. */
function failed(outcome: Outcome): boolean {
  return !outcome.ok || runFailed(outcome.result);
}

/**
 * 0 when every source tried caught up or was leased elsewhere; 3 when only keys were
 * rejected; 2 when every failure needs an operator (configuration, a key file missing, a
 * FEED_TYPES that differs from the cursor's, a cursor the feed no longer knows), with a
 * rejected key among them at most; else 1: something a later run may get past.
 */
export function exitCodeFor(outcomes: readonly Outcome[]): number {
  const failures = outcomes.filter(failed);
  if (failures.length === 0) return 0;
  const codes = failures.map((o) => (o.ok ? 1 : exitCodeOf(o.error)));
  if (codes.every((c) => c === 3)) return 3;
  return codes.every((c) => c === 2 || c === 3) ? 2 : 1;
}

/** On stderr, one line per failed source, and whether Redis (or Postgres) kept the outbox back. */
function tellOperator(
  config: Config,
  outcomes: readonly Outcome[],
  describe: (err: unknown) => string,
  handedOver: boolean,
  handOverError: unknown,
): void {
  const prefix = (source: string): string => (config.sourcesFile === null ? '' : `source ${source}: `);
  for (const o of outcomes) {
    if (!o.ok) process.stderr.write(`feedsync: ${prefix(o.source)}${describe(o.error)}\n`);
  }
  if (!handedOver || outcomes.some((o) => o.ok && !o.result.drained && o.result.status !== 'stopped')) {
    process.stderr.write(`feedsync: ${handOverFailure(handOverError, config)}\n`);
  }
}

/** The exit code of a once run that stopped at SYNC_ONCE_MAX_MS before every feed's end, with no failure. */
export const EXIT_NOT_CAUGHT_UP = 4;

/** On stderr, one line: the run stopped at its limit, what it kept, and that the next run goes on. */
function tellLimit(config: Config, outcomes: readonly Outcome[], notStarted: number): void {
  const short = outcomes.flatMap((o) => (o.ok && o.result.status === 'limit-reached' ? [o] : []));
  const stored = short.reduce((n, o) => n + o.result.stored, 0);
  const which =
    config.sourcesFile === null
      ? 'before the end of the feed'
      : `with ${short.length} source(s) short of their feed's end and ${notStarted} not started`;
  process.stderr.write(
    `feedsync: not caught up: the run stopped at SYNC_ONCE_MAX_MS (${config.syncOnceMaxMs} ms) ${which}; ` +
      `${stored} new events stored and handed over; the next run goes on from the cursor (exit ${EXIT_NOT_CAUGHT_UP})\n`,
  );
}

function tally(outcomes: readonly Outcome[], total: number): Record<string, number> {
  const count = (pick: (o: Outcome) => boolean): number => outcomes.filter(pick).length;
  return {
    sources: total,
    caught_up: count((o) => o.ok && o.result.status === 'caught-up' && o.result.drained),
    locked_elsewhere: count((o) => o.ok && o.result.status === 'locked'),
    lease_lost: count((o) => o.ok && o.result.status === 'lease-lost'),
    not_caught_up: count((o) => o.ok && o.result.status === 'limit-reached'),
    failed: count(failed),
    not_started: total - outcomes.length,
  };
}

type Holder = NonNullable<Awaited<ReturnType<typeof leaseHolderOf>>>;

/** The summary line of one source's turn; `holder`, of a lease held elsewhere. */
function logOutcome(log: Logger, outcome: Outcome, level: 'info' | 'debug', holder?: Holder): void {
  if (!outcome.ok) {
    const message = outcome.error instanceof Error ? outcome.error.message : String(outcome.error);
    log.error({ source: outcome.source, outcome: 'failed', err: outcome.error }, `source failed: ${message}`);
    return;
  }
  const r = outcome.result;
  const line = {
    source: outcome.source,
    outcome: r.status,
    drained: r.drained,
    stored: r.stored,
    duplicates: r.duplicates,
    quarantined: r.quarantined,
    pages: r.pages,
    cursor: r.cursor,
    durationMs: Math.round(r.durationMs),
  };
  if (r.status === 'locked' && holder) {
    const until = holder.expiresAt.toISOString();
    log.info(
      { ...line, holder: holder.holder, leaseExpiresAt: until },
      `${holder.holder} holds the lease of this source until ${until} unless it renews it; skipped ` +
        '(a worker that was killed holds it until then: run again after that)',
    );
  } else if (r.status === 'locked') log.info(line, 'another worker holds the lease of this source; skipped');
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
