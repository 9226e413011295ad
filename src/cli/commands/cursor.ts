import { Command } from 'commander';
import { configForSource } from '../../config.js';
import { action } from '../context.js';
import { withStore } from '../with-store.js';

const sourceOption = [
  '--source <source>',
  'the cursor key: FEED_SOURCE, or a source of FEED_SOURCES_FILE (default FEED_SOURCE)',
] as const;

export function cursorCommand(): Command {
  const cursor = new Command('cursor').description("Inspect or move a source's cursor (to replay the feed).");
  cursor
    .command('show')
    .description('Print the cursor: the id read after, the type filter, the last success.')
    .option(...sourceOption)
    .option('--json', 'print JSON')
    .action(
      action(async ({ config, logger }, opts: { source?: string; json?: boolean }) => {
        const { getCursor } = await import('../../store/cursor.js');
        const source = opts.source ?? config.feed.source;
        const row = await withStore(config, logger, (store) => getCursor(store, source));
        if (opts.json)
          process.stdout.write(`${JSON.stringify(row ?? { source, afterId: null, types: null })}\n`);
        else if (!row)
          process.stdout.write(`source ${source}: no cursor yet (the next run starts at the beginning)\n`);
        else {
          process.stdout.write(
            `source ${row.source}: after ${row.afterId ?? '(start)'}, types ${row.types?.join(',') ?? 'all'}, ` +
              `updated ${row.updatedAt.toISOString()}, last success ${row.lastSuccessAt?.toISOString() ?? 'never'}\n`,
          );
        }
        return 0;
      }),
    );
  cursor
    .command('set <event-id>')
    .description(
      'Move the cursor so that the next run reads after this event id (the filter is kept). ' +
        'With EVENTS_RETENTION_DAYS set, the id must be a stored event inside the retention.',
    )
    .option(...sourceOption)
    .action(
      action(async ({ config, logger }, eventId: string, opts: { source?: string }) => {
        const { setCursor } = await import('../../store/cursor.js');
        const { assertEventWithinRetention } = await import('../../store/retention-guard.js');
        const { source } = configForSource(config, opts.source ?? config.feed.source).feed;
        await withStore(config, logger, async (store) => {
          await assertEventWithinRetention(store, source, eventId, 'cursor set', config.eventsRetentionDays);
          await setCursor(store, source, eventId);
        });
        process.stdout.write(`source ${source}: the next run reads after ${eventId}\n`);
        return 0;
      }),
    );
  cursor
    .command('reset')
    .description(
      "Start the source over from the beginning of the feed, with its current types (the file's, else FEED_TYPES).",
    )
    .option(...sourceOption)
    .action(
      action(async ({ config, logger }, opts: { source?: string }) => {
        const { setCursor } = await import('../../store/cursor.js');
        const { source, types } = configForSource(config, opts.source ?? config.feed.source).feed;
        await withStore(config, logger, (store) => setCursor(store, source, null, types));
        process.stdout.write(
          `source ${source}: reset to the start of the feed (types ${types?.join(',') ?? 'all'}); stored events are de-duplicated\n`,
        );
        if (config.eventsRetentionDays !== null) {
          process.stdout.write(
            `note: events older than EVENTS_RETENTION_DAYS (${config.eventsRetentionDays}) were pruned: the feed's copies ` +
              'are stored and enqueued again as new, then pruned again\n',
          );
        }
        return 0;
      }),
    );
  return cursor;
}
