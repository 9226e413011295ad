import { Command } from 'commander';
import { action } from '../context.js';
import { withSourceSync } from '../source-sync-run.js';

export function reconcileCommand(): Command {
  return new Command('reconcile')
    .description(
      'Re-read the feed from an older point without moving the cursor; store and enqueue only what was missing.',
    )
    .option(
      '--from <event-id>',
      'read after this event id (default: the start of the feed); with EVENTS_RETENTION_DAYS set, ' +
        'required, and a stored event inside the retention',
    )
    .option(
      '--source <source>',
      'FEED_SOURCE, a source of FEED_SOURCES_FILE, or one with a stored cursor (default FEED_SOURCE)',
    )
    .addHelpText(
      'after',
      '\nOn a terminal a progress line (pages, events, events/s) is redrawn on stderr.\n' +
        'Exit codes: 0 done (also when stopped early by SIGTERM), 1 runtime failure (the feed, Postgres),\n' +
        '2 usage or configuration error (an --from the feed does not know: nothing is read), 3 key rejected.',
    )
    .action(
      action(async (ctx, opts: { from?: string; source?: string }) => {
        const result = await withSourceSync(ctx, opts.source, (sync, signal) =>
          sync.reconcile(opts.from ?? null, signal),
        );
        process.stdout.write(
          `reconcile ${result.status === 'stopped' ? 'stopped early' : 'done'}: ${result.stored} missing events stored and enqueued, ` +
            `${result.duplicates} already stored, ${result.quarantined} quarantined, ${result.pages} pages read\n`,
        );
        return 0;
      }),
    );
}
