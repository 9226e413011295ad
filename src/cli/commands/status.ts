import { Command } from 'commander';
import { action } from '../context.js';
import { withStore } from '../with-store.js';

export function statusCommand(): Command {
  return new Command('status')
    .description(
      'Per source: cursor, types, last success, events stored, outbox backlog, quarantine; queue counts.',
    )
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nExit codes: 0 printed, 1 runtime failure (Postgres), 2 configuration error or a schema not migrated.',
    )
    .action(
      action(async ({ config, logger }, opts: { json?: boolean }) => {
        const { createPublisher } = await import('../../queue/publisher.js');
        const { jobOptionsFor } = await import('../../queue/routes.js');
        const { statusReport, formatStatus } = await import('../status-report.js');
        const publisher = createPublisher({
          redis: config.redis,
          prefix: config.queues.prefix,
          jobOptions: jobOptionsFor(config.queues),
          timeoutMs: 2000,
        });
        try {
          const report = await withStore(config, logger, (store) => statusReport(config, store, publisher));
          process.stdout.write(opts.json ? `${JSON.stringify(report, null, 2)}\n` : formatStatus(report));
          return 0;
        } finally {
          await publisher.close();
        }
      }),
    );
}
