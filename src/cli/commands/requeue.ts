import { Command } from 'commander';
import { action } from '../context.js';
import { withStore } from '../with-store.js';

export function requeueCommand(): Command {
  return new Command('requeue')
    .description(
      'Re-drive published outbox rows into BullMQ with the same job ids (after Redis lost its data).',
    )
    .requiredOption(
      '--since <time|event-id>',
      'rows published at or after a time (2024-05-01T12:00Z, UTC when no zone; or 90m, 6h, 2d ago), ' +
        "or from a stored event's row on",
    )
    .option('--source <source>', 'the source whose rows to re-drive (default FEED_SOURCE)')
    .option('--dry-run', 'count the rows per queue, add nothing')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nJobs still kept in Redis are left as they are (same job id), so running it twice adds nothing new.\n' +
        'Published outbox rows are kept OUTBOX_RETENTION_HOURS (default 168, 7 days) and then pruned: jobs\n' +
        'older than that cannot be re-driven. Rows not yet published are left to the relay of the next sync.\n' +
        'Exit codes: 0 done, 1 Redis or Postgres failed (run it again: it is idempotent), 2 usage error.',
    )
    .action(
      action(
        async (
          { config, logger },
          opts: { since: string; source?: string; dryRun?: boolean; json?: boolean },
        ) => {
          const { requeue, parseSince } = await import('../../queue/requeue.js');
          const { createPublisher } = await import('../../queue/publisher.js');
          const since = parseSince(opts.since);
          const source = opts.source ?? config.feed.source;
          const publisher = createPublisher({ redis: config.redis, prefix: config.queues.prefix });
          try {
            const result = await withStore(config, logger, (store) =>
              requeue(store, publisher, {
                source,
                since,
                retentionHours: config.queues.outboxRetentionHours,
                dryRun: opts.dryRun === true,
              }),
            );
            if (opts.json) {
              process.stdout.write(
                `${JSON.stringify({ source, dryRun: opts.dryRun === true, ...result })}\n`,
              );
              return 0;
            }
            const perQueue = Object.entries(result.byQueue)
              .map(([q, n]) => `${q} ${n}`)
              .join(', ');
            const lines = [
              `${opts.dryRun ? 'would requeue' : 'requeued'} ${result.requeued} published outbox rows of source ${source}` +
                `${perQueue ? ` (${perQueue})` : ''}, with their own job ids: jobs still in Redis are left as they are`,
            ];
            if (result.predatesRetention) {
              lines.push(
                `note: the start predates the oldest kept row (${result.oldestKept?.toISOString() ?? 'none kept'}): ` +
                  `published rows are pruned after OUTBOX_RETENTION_HOURS (${config.queues.outboxRetentionHours} h), ` +
                  'so jobs published before it cannot be re-driven',
              );
            }
            if (result.unpublished > 0) {
              lines.push(
                `${result.unpublished} rows are not published yet: the next "feedsync sync" adds them`,
              );
            }
            process.stdout.write(`${lines.join('\n')}\n`);
            return 0;
          } finally {
            await publisher.close();
          }
        },
      ),
    );
}
