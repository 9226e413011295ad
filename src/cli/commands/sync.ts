import { Command, Option } from 'commander';
import { onlySource } from '../../config/source-config.js';
import { action } from '../context.js';
import { knownSourceConfig } from '../known-source.js';

export function syncCommand(): Command {
  return new Command('sync')
    .description('Page the events feed into Postgres and hand every new event to BullMQ.')
    .addOption(
      new Option(
        '--once',
        'page until caught up (or SYNC_ONCE_MAX_MS), drain the outbox, exit (CronJob; the default)',
      ).conflicts('watch'),
    )
    .addOption(
      new Option(
        '--watch',
        'run every SYNC_INTERVAL_MS, serving /healthz, /readyz, /metrics on METRICS_PORT',
      ),
    )
    .option('--migrate', 'apply pending migrations first instead of refusing to run')
    .option(
      '--source <source>',
      'sync this source alone: FEED_SOURCE, a source of FEED_SOURCES_FILE, or one with a stored cursor',
    )
    .addHelpText(
      'after',
      "\nExit codes: 0 done (also when another worker holds a source's lease), 1 runtime failure, worth\n" +
        'retrying (the outbox could not be drained counts: the events are stored), 2 needs an operator,\n' +
        'retrying cannot help: configuration or usage (an unknown --source included), a type filter that\n' +
        "differs from the cursor's, a key of the other kind (test, live) than the cursor's, a cursor the\n" +
        'feed no longer knows (the line names the fix: cursor set, cursor reset, reconcile), 3 key rejected,\n' +
        '4 not caught up: the run stopped at SYNC_ONCE_MAX_MS (default 15 min) before the end of the feed,\n' +
        "kept what it read, and the next run goes on from the cursor, 5 another account's feed: a page\n" +
        'mostly of events stored before with other content (a key swapped, a simulator restarted), nothing\n' +
        'of it stored. With --watch an unknown cursor fails each run (backing off) until the cursor is moved.',
    )
    .action(
      action(
        async (
          { config, logger },
          opts: { once?: boolean; watch?: boolean; migrate?: boolean; source?: string },
        ) => {
          const { runSources } = await import('../run-sources.js');
          // Refused (exit 2) before anything is stored: a typo would be a new source.
          if (opts.source !== undefined) await knownSourceConfig(config, logger, opts.source);
          const own = opts.source === undefined ? config : onlySource(config, opts.source);
          return runSources(own, logger, { watch: opts.watch === true, migrate: opts.migrate === true });
        },
      ),
    );
}
