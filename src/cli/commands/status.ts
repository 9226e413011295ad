import { Command, Option } from 'commander';
import { onlySource } from '../../config/source-config.js';
import { action } from '../context.js';
import { knownSourceConfig } from '../known-source.js';
import { withStore } from '../with-store.js';

export function statusCommand(): Command {
  return new Command('status')
    .description(
      'Sources by state (failing, lagging, never caught up), then per source, worst first: cursor, types, last ' +
        'success, events stored, lease, outbox backlog, quarantine; queue counts.',
    )
    .option('--json', 'print JSON')
    .option(
      '--source <source>',
      'this source alone: FEED_SOURCE, a source of FEED_SOURCES_FILE, or one with a stored cursor',
    )
    .addOption(
      new Option('--failing', 'list only the sources whose last turn failed').conflicts([
        'lagging',
        'source',
      ]),
    )
    .addOption(
      new Option(
        '--lagging',
        'list only the sources whose newest stored event is over 30 minutes old',
      ).conflicts('source'),
    )
    .option('--all', 'list every source, not the 50 worst')
    .addHelpText(
      'after',
      '\nThe listing is bounded: the 50 worst sources (failing, then lagging, then never caught up, then by\n' +
        'name), and how many it left out; --all lists them all.\n' +
        '\nExit codes: 0 printed, 1 runtime failure (Postgres), 2 configuration error (an unknown --source\n' +
        'included) or a schema not migrated.',
    )
    .action(
      action(
        async (
          { config, logger },
          opts: { json?: boolean; source?: string; failing?: boolean; lagging?: boolean; all?: boolean },
        ) => {
          const { publisherFor } = await import('../../compose/parts.js');
          const { statusReport, formatStatus } = await import('../status-report.js');
          if (opts.source !== undefined) await knownSourceConfig(config, logger, opts.source);
          const own = opts.source === undefined ? config : onlySource(config, opts.source);
          // A quick look: a Redis that does not answer in 2 s is reported, not waited for.
          const publisher = publisherFor(config, { redisTimeoutMs: 2000 });
          try {
            const report = await withStore(config, logger, (store) =>
              statusReport(own, store, publisher, {
                ...(opts.source === undefined ? {} : { only: opts.source }),
                filter: opts.failing ? 'failing' : opts.lagging ? 'lagging' : null,
                ...(opts.all ? { limit: null } : {}),
              }),
            );
            process.stdout.write(opts.json ? `${JSON.stringify(report, null, 2)}\n` : formatStatus(report));
            return 0;
          } finally {
            await publisher.close();
          }
        },
        // status reads Postgres and Redis only: a fleet's key files are not its to read. Its
        // log lines (waiting for Postgres) go to stderr: stdout is the report, whole.
        { keys: false, logTo: process.stderr },
      ),
    );
}
