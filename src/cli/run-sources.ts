import type { Config } from '../config/config-type.js';
import { secretsOf } from '../config/secrets.js';
import { exitCodeOf } from '../errors.js';
import type { Logger } from '../logger.js';
import { pushMetrics } from '../metrics/push.js';
import { scrubText } from '../scrub.js';
import { EXIT_FOREIGN_FEED } from '../store/foreign-feed.js';
import { type Outcome, turnFailed } from '../sync/scheduler.js';
import { runDrained, runWorker, type WorkerResult } from '../sync/worker.js';
import { describeFailure } from './failure.js';
import { handOverFailure } from './hand-over.js';
import { launchedByNpm } from './launched-by-npm.js';
import { progressReporter } from './progress.js';
import { shutdownSignal } from './shutdown.js';

/**
 * `feedsync sync`, for the one source of FEED_SOURCE and for a sources file alike (a
 * list of one is a list): the worker's main loop (runWorker) with what is the
 * terminal's around it: SIGTERM, the progress line, a line on stderr per failure, the
 * Pushgateway, and the exit code, which it returns.
 */
export async function runSources(
  config: Config,
  logger: Logger,
  opts: { watch: boolean; migrate: boolean },
): Promise<number> {
  const log = logger.child({ module: 'cli' });
  const shutdown = shutdownSignal(logger, process.exit, undefined, launchedByNpm());
  const progress = opts.watch ? null : progressReporter();
  // Every line below, and each lease row's last_error, is scrubbed as log lines are.
  const secrets = secretsOf(config);
  const describe = (err: unknown): string => scrubText(describeFailure(err, config), secrets);
  try {
    const run = await runWorker(config, {
      mode: opts.watch ? 'watch' : 'once',
      migrate: opts.migrate,
      signal: shutdown.signal,
      logger,
      describe,
      hooks: {
        onCommit: (_source, info) => progress?.onCommit(info),
        onTurnsDone: () => progress?.done(),
        onRunEnd: (result) => push(config, result, log),
      },
    });
    if (opts.watch) return 0;
    const { outcomes } = run;
    tellOperator(config, outcomes, describe, run.handedOver, run.handOverError);
    process.stdout.write(`${summaryLine(config, outcomes, run.handedOver)}\n`);
    const reached = new Set(outcomes.map((o) => o.source));
    if (run.stoppedShort) tellLimit(config, outcomes, config.sources.length - reached.size);
    const code = exitCodeFor(outcomes);
    if (code === 0 && !run.handedOver) return 1;
    return code === 0 && run.stoppedShort ? EXIT_NOT_CAUGHT_UP : code;
  } finally {
    progress?.done();
    shutdown.dispose();
  }
}

/** A once run's metrics to PUSHGATEWAY_URL, unless its one source was leased elsewhere: that run did nothing worth reporting. */
async function push(config: Config, run: WorkerResult, log: Logger): Promise<void> {
  const only = config.sourcesFile === null ? run.outcomes[0] : undefined;
  if (!config.pushgatewayUrl || (only?.ok && only.result.status === 'held-elsewhere')) return;
  const group = config.sourcesFile === null ? { source: config.feed.source } : {};
  await pushMetrics(config.pushgatewayUrl, run.registry, group, log);
}

/**
 * 0 when every source tried caught up or was leased elsewhere; 3 when only keys were
 * rejected; 5 when only feeds of another account were refused (FOREIGN_FEED); 2 when
 * every failure needs an operator (configuration, a key file missing, a FEED_TYPES that
 * differs from the cursor's, a key of the other kind than the cursor's, a cursor the feed
 * no longer knows, another account's feed), with a rejected key among them at most; else
 * 1: something a later run may get past.
 */
export function exitCodeFor(outcomes: readonly Outcome[]): number {
  const failures = outcomes.filter(turnFailed);
  if (failures.length === 0) return 0;
  const codes = failures.map((o) => (o.ok ? 1 : exitCodeOf(o.error)));
  if (codes.every((c) => c === 3)) return 3;
  if (codes.every((c) => c === EXIT_FOREIGN_FEED)) return EXIT_FOREIGN_FEED;
  return codes.every((c) => c === 2 || c === 3 || c === EXIT_FOREIGN_FEED) ? 2 : 1;
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
  if (!runDrained({ handedOver, outcomes })) {
    process.stderr.write(
      `feedsync: ${scrubText(handOverFailure(handOverError, config), secretsOf(config))}\n`,
    );
  }
}

/**
 * A once run in one plain line, as migrate, reconcile and requeue end: what it stored,
 * and over a sources file how its sources ended. The JSON log line "sync run finished"
 * says the same for machines.
 */
export function summaryLine(config: Config, outcomes: readonly Outcome[], handedOver: boolean): string {
  const results = outcomes.flatMap((o) => (o.ok ? [o.result] : []));
  const sum = (pick: (r: (typeof results)[number]) => number): number =>
    results.reduce((n, r) => n + pick(r), 0);
  const count = (status: string): number => results.filter((r) => r.status === status).length;
  const failed = outcomes.filter(turnFailed).length;
  const stored =
    `${sum((r) => r.stored)} events stored, ${sum((r) => r.duplicates)} already stored, ` +
    `${sum((r) => r.quarantined)} quarantined, ${sum((r) => r.pages)} pages read`;
  const ends = [
    [count('caught-up'), 'caught up'],
    [count('held-elsewhere'), 'held by another worker'],
    [count('limit-reached'), 'short of the end (SYNC_ONCE_MAX_MS)'],
    [count('stopped'), 'stopped'],
    [failed, 'failed'],
  ] as const;
  const sources =
    config.sourcesFile === null && outcomes.length === 1
      ? (ends.find(([n]) => n > 0)?.[1] ?? 'not started')
      : `${outcomes.length} sources: ${ends
          .filter(([n]) => n > 0)
          .map(([n, what]) => `${n} ${what}`)
          .join(', ')}`;
  return `sync ${sources}: ${stored}; outbox ${handedOver ? 'handed over' : 'not handed over'}`;
}

/** The exit code of a once run that stopped at SYNC_ONCE_MAX_MS before every feed's end, with no failure. */
const EXIT_NOT_CAUGHT_UP = 4;

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
