import { Command } from 'commander';
import { action } from '../context.js';
import { knownSourceConfig } from '../known-source.js';
import { progressReporter } from '../progress.js';
import { shutdownSignal } from '../shutdown.js';

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
      action(async ({ config, logger }, opts: { from?: string; source?: string }) => {
        const { createSync } = await import('../../sync/sync.js');
        const shutdown = shutdownSignal(logger, process.exit, undefined, config.launchedByNpm);
        const progress = progressReporter();
        const sync = createSync(await knownSourceConfig(config, logger, opts.source), {
          logger,
          hooks: { onCommit: progress.onCommit },
        });
        try {
          const result = await sync.reconcile(opts.from ?? null, shutdown.signal);
          progress.done();
          process.stdout.write(
            `reconcile ${result.status === 'stopped' ? 'stopped early' : 'done'}: ${result.stored} missing events stored and enqueued, ` +
              `${result.duplicates} already stored, ${result.quarantined} quarantined, ${result.pages} pages read\n`,
          );
          return 0;
        } finally {
          await sync.close();
          shutdown.dispose();
        }
      }),
    );
}
