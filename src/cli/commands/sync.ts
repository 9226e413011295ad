import { Command, Option } from 'commander';
import { action } from '../context.js';

export function syncCommand(): Command {
  return new Command('sync')
    .description('Page the events feed into Postgres and hand every new event to BullMQ.')
    .addOption(
      new Option('--once', 'page until caught up, drain the outbox, exit (CronJob; the default)').conflicts(
        'watch',
      ),
    )
    .addOption(
      new Option(
        '--watch',
        'run every SYNC_INTERVAL_MS, serving /healthz, /readyz, /metrics on METRICS_PORT',
      ),
    )
    .option('--migrate', 'apply pending migrations first instead of refusing to run')
    .addHelpText(
      'after',
      '\nExit codes: 0 done (also when another run holds the lock), 1 runtime failure, worth retrying (the\n' +
        'outbox could not be drained counts: the events are stored), 2 needs an operator, retrying cannot\n' +
        "help: configuration or usage, a type filter that differs from the cursor's, a cursor the feed no\n" +
        'longer knows (the line names the fix: cursor set, cursor reset, reconcile), 3 key rejected.\n' +
        'With --watch an unknown cursor fails each run (backing off) until the cursor is moved.',
    )
    .action(
      action(async ({ config, logger }, opts: { once?: boolean; watch?: boolean; migrate?: boolean }) => {
        const { runSync } = await import('../run-sync.js');
        return runSync(config, logger, { watch: opts.watch === true, migrate: opts.migrate === true });
      }),
    );
}
