import { Command } from 'commander';
import type { Config } from '../../config/config-type.js';
import { ConfigError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { Publisher } from '../../queue/publisher.js';
import type { RequeueResult } from '../../queue/requeue.js';
import { parseSince } from '../../queue/since.js';
import { action } from '../context.js';
import { knownSourceConfig } from '../known-source.js';
import { withStore } from '../with-store.js';

interface RequeueFlags {
  since?: string;
  failed?: boolean;
  queue?: string;
  source?: string;
  dryRun?: boolean;
  json?: boolean;
}

export function requeueCommand(): Command {
  return new Command('requeue')
    .description(
      'Re-drive published outbox rows into BullMQ with the same job ids (after Redis lost its data), ' +
        'or retry the jobs that failed for good (--failed).',
    )
    .option(
      '--since <time|event-id>',
      'rows published at or after a time (2024-05-01T12:00Z, UTC when no zone), or a duration ago in ' +
        "s, m, h or d (90m, 6h, 7d), or from a stored event's row on",
    )
    .option('--failed', 'move the jobs that failed for good back to waiting, with their own ids')
    .option('--queue <queue>', 'with --failed: only this queue (default both event queues)')
    .option(
      '--source <source>',
      'the source whose rows to re-drive (default FEED_SOURCE; with FEED_SOURCES_FILE, every source of the file; not with --failed)',
    )
    .option('--dry-run', 'count the rows per queue, add nothing')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nJobs still kept in Redis are left as they are (same job id), so running it twice adds nothing new;\n' +
        'the output says how many were added and how many were already there.\n' +
        'Published outbox rows are kept OUTBOX_RETENTION_HOURS (default 168, 7 days) and then pruned: jobs\n' +
        'older than that cannot be re-driven. With EVENTS_RETENTION_DAYS set, a start older than that is\n' +
        'refused. Rows not yet published are left to the relay of the next sync.\n' +
        'A job fails for good after JOB_ATTEMPTS runs (default 5); --failed runs it again, JOB_ATTEMPTS more times.\n' +
        'Exit codes: 0 done, 1 Redis or Postgres failed (run it again: it is idempotent) or some rows could\n' +
        'not be re-driven because their event is no longer stored (named in the output; a dry run says the\n' +
        'same), 2 usage error.',
    )
    .action(
      action(async ({ config, logger }, opts: RequeueFlags) => {
        if (opts.failed === (opts.since !== undefined)) {
          throw new ConfigError('requeue: give either --since <time|event-id> or --failed', 'USAGE');
        }
        if (opts.queue !== undefined && !opts.failed) {
          throw new ConfigError('--queue: only with --failed', 'USAGE');
        }
        const { publisherFor } = await import('../../compose/parts.js');
        const { queueStoreFor } = await import('../../compose/queue-store.js');
        const publisher = publisherFor(config);
        const holder = queueStoreFor(config).holder;
        try {
          if (opts.failed) return await retryFailed(config, publisher, opts);
          const { requeue } = await import('../../queue/requeue.js');
          const since = parseSince(checkDuration(opts.since ?? ''));
          const sources = await sourcesOf(config, logger, opts.source);
          if (sources.length > 1 && 'eventId' in since) {
            throw new ConfigError(
              `requeue --since <event-id>: an event id is one source's; add --source (FEED_SOURCES_FILE has ${sources.length})`,
              'USAGE',
            );
          }
          const dryRun = opts.dryRun === true;
          // One source after the other: each is a few statements a batch, and the output follows the file.
          const results = await withStore(config, logger, async (store) => {
            const done: SourceResult[] = [];
            for (const source of sources) {
              const result = await requeue(store, publisher, {
                source,
                since,
                retentionHours: config.queues.outboxRetentionHours,
                eventsRetentionDays: config.eventsRetentionDays,
                dryRun,
              });
              done.push({ source, result });
            }
            return done;
          });
          process.stdout.write(
            opts.json
              ? results
                  .map(({ source, result }) => `${JSON.stringify({ source, dryRun, ...result })}\n`)
                  .join('')
              : describeAll(config, holder, dryRun, results),
          );
          // Rows with no event left cannot be re-driven: their jobs need a hand, so the run is not a success.
          return results.some(({ result }) => result.unavailable > 0) ? 1 : 0;
        } finally {
          await publisher.close();
        }
      }),
    );
}

interface SourceResult {
  source: string;
  result: RequeueResult;
}

/**
 * The sources to re-drive: the one named (an unknown one is a usage error, exit 2, as for
 * cursor and reconcile), else every source of FEED_SOURCES_FILE, else FEED_SOURCE.
 */
async function sourcesOf(config: Config, logger: Logger, named: string | undefined): Promise<string[]> {
  if (named === undefined && config.sourcesFile !== null) return config.sources.map((s) => s.source);
  return [(await knownSourceConfig(config, logger, named)).feed.source];
}

/** One source as before; over a file, the sources that had something, then the totals. */
function describeAll(
  config: Config,
  holder: string,
  dryRun: boolean,
  results: readonly SourceResult[],
): string {
  const [only] = results;
  if (results.length === 1 && only) return describeRequeue(config, holder, only.source, dryRun, only.result);
  const quiet = (r: RequeueResult): boolean => r.requeued === 0 && r.unavailable === 0 && r.unpublished === 0;
  const sum = (pick: (r: RequeueResult) => number): number =>
    results.reduce((n, { result }) => n + pick(result), 0);
  const idle = results.filter(({ result }) => quiet(result)).length;
  const rows = `${sum((r) => r.requeued)} published outbox rows of ${results.length} sources of FEED_SOURCES_FILE`;
  const total = dryRun
    ? `in all: would requeue ${rows}`
    : `in all: requeued ${rows}: ${sum((r) => r.added)} jobs added, ${sum((r) => r.alreadyPresent)} already in ${holder}` +
      sameJobs(sum((r) => r.sameJob));
  const each = results
    .filter(({ result }) => !quiet(result))
    .map(({ source, result }) => describeRequeue(config, holder, source, dryRun, result));
  return `${each.join('')}${total}${idle > 0 ? ` (${idle} sources had no rows)` : ''}\n`;
}

/**
 * A number with a unit requeue does not take (`1w`, `2days`) is a duration typed wrong,
 * not an event id: say which units there are rather than look for an event named `1w`.
 */
function checkDuration(value: string): string {
  const text = value.trim();
  if (/^\d+\s*[a-z]+$/i.test(text) && !/^\d+[smhd]$/.test(text)) {
    throw new ConfigError(
      `requeue --since: "${text}" is not a duration requeue takes: the units are s, m, h and d ` +
        '(90m, 6h, 7d); or give a time (2024-05-01T12:00Z) or a stored event id',
      'USAGE',
    );
  }
  return value;
}

async function retryFailed(config: Config, publisher: Publisher, opts: RequeueFlags): Promise<number> {
  const known = [config.queues.emailEvents, config.queues.contactEvents];
  if (opts.queue !== undefined && !known.includes(opts.queue)) {
    throw new ConfigError(`--queue: "${opts.queue}" is not an event queue (${known.join(', ')})`, 'USAGE');
  }
  if (opts.dryRun) throw new ConfigError('--dry-run: not with --failed (see "feedsync status")', 'USAGE');
  // A failed job is retried where it sits, in its queue; the queues are not kept per source.
  if (opts.source !== undefined) {
    throw new ConfigError('--source: not with --failed (it retries every failed job of the queue)', 'USAGE');
  }
  const retried: Record<string, string[]> = {};
  for (const queue of opts.queue ? [opts.queue] : known) retried[queue] = await publisher.retryFailed(queue);
  if (opts.json) {
    process.stdout.write(`${JSON.stringify({ retried })}\n`);
    return 0;
  }
  const lines = Object.entries(retried).map(
    ([queue, ids]) =>
      `${queue}: ${ids.length} failed jobs moved back to waiting with their own ids` +
      (ids.length > 0 ? ` (${ids.slice(0, 5).join(', ')}${ids.length > 5 ? ', …' : ''})` : ''),
  );
  process.stdout.write(`${lines.join('\n')}\n`);
  return 0;
}

/** The rows that are no job of their own, where there are any: the counts then add up. */
function sameJobs(n: number): string {
  return n === 0 ? '' : `, ${n} rows of the same job id as another (an event with two outbox rows: one job)`;
}

function describeRequeue(
  config: Config,
  holder: string,
  source: string,
  dryRun: boolean,
  result: RequeueResult,
): string {
  const perQueue = Object.entries(result.byQueue)
    .map(([q, n]) => `${q} ${n}`)
    .join(', ');
  const rows = `${result.requeued} published outbox rows of source ${source}${perQueue ? ` (${perQueue})` : ''}`;
  const lines = [
    dryRun
      ? `would requeue ${rows}, with their own job ids`
      : `requeued ${rows}: ${result.added} jobs added, ${result.alreadyPresent} already in ${holder} (left as they were)` +
        sameJobs(result.sameJob),
  ];
  if (result.predatesRetention) {
    lines.push(
      `note: the start predates the oldest kept row (${result.oldestKept?.toISOString() ?? 'none kept'}): ` +
        `published rows are pruned after OUTBOX_RETENTION_HOURS (${config.queues.outboxRetentionHours} h), ` +
        'so jobs published before it cannot be re-driven',
    );
  }
  if (result.unavailable > 0) {
    const shown = result.unavailableIds.map((id) => JSON.stringify(id)).join(', ');
    lines.push(
      `error: ${result.unavailable} published rows ${dryRun ? 'could not be' : 'were not'} re-driven: their events ` +
        `are no longer stored, so their jobs' data is gone (${shown}${result.unavailable > result.unavailableIds.length ? ', …' : ''})`,
    );
  }
  if (result.unpublished > 0) {
    lines.push(`${result.unpublished} rows are not published yet: the next "feedsync sync" adds them`);
  }
  return `${lines.join('\n')}\n`;
}
