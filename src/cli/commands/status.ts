import { Command } from 'commander';
import { onlySource } from '../../config/config.js';
import { action } from '../context.js';
import { withStore } from '../with-store.js';

export function statusCommand(): Command {
  return new Command('status')
    .description(
      'Per source: cursor, types, last success, events stored, outbox backlog, quarantine; queue counts.',
    )
    .option('--json', 'print JSON')
    .option('--source <source>', 'this source alone: FEED_SOURCE, or a source of FEED_SOURCES_FILE')
    .addHelpText(
      'after',
      '\nExit codes: 0 printed, 1 runtime failure (Postgres), 2 configuration error (an unknown --source\n' +
        'included) or a schema not migrated.',
    )
    .action(
      action(async ({ config, logger }, opts: { json?: boolean; source?: string }) => {
        const { publisherFor } = await import('../../compose/parts.js');
        const { statusReport, formatStatus } = await import('../status-report.js');
        const own = opts.source === undefined ? config : onlySource(config, opts.source);
        // A quick look: a Redis that does not answer in 2 s is reported, not waited for.
        const publisher = publisherFor(config, { redisTimeoutMs: 2000 });
        try {
          const report = await withStore(config, logger, (store) =>
            statusReport(own, store, publisher, opts.source === undefined ? {} : { only: opts.source }),
          );
          process.stdout.write(opts.json ? `${JSON.stringify(report, null, 2)}\n` : formatStatus(report));
          return 0;
        } finally {
          await publisher.close();
        }
      }),
    );
}
