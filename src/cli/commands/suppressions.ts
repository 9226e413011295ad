import { Command } from 'commander';
import { isAddress } from '../../api/address.js';
import { configForSource } from '../../config/config.js';
import { ConfigError } from '../../errors.js';
import type { Suppression } from '../../store/suppressions.js';
import { action } from '../context.js';
import { withStore } from '../with-store.js';

const sourceOption = [
  '--source <source>',
  'FEED_SOURCE, or a source of FEED_SOURCES_FILE (default FEED_SOURCE)',
] as const;

/** Logs go to stderr: stdout is the answer to the person who asked (and holds addresses, which logs never do). */
const stdoutIsTheAnswer = { logTo: process.stderr };

/**
 * `feedsync suppressions list|remove`: the addresses feedsync's records say not to send
 * to (bounced, complained, unsubscribed; docs/DATA.md), and the explicit decision to send
 * to one again. Addresses are printed to the person who asked, never logged.
 */
export function suppressionsCommand(): Command {
  const suppressions = new Command('suppressions')
    .description(
      'List the addresses not to send to (bounced, complained, unsubscribed), or remove one by hand.',
    )
    .addHelpText('after', "\nExit codes: each subcommand's --help lists its own; without a subcommand, 2.");
  suppressions
    .command('list')
    .description("Print a source's suppressed addresses with their reason and the event that decided it.")
    .option(...sourceOption)
    .option('--json', 'print a JSON array of {source, address, reason, event_id, at}')
    .addHelpText(
      'after',
      '\nExit codes: 0 printed (also when there are none), 1 runtime failure (Postgres), 2 usage or\nconfiguration error.',
    )
    .action(
      action(async ({ config, logger }, opts: { source?: string; json?: boolean }) => {
        const { listSuppressions } = await import('../../store/suppressions.js');
        const { source } = configForSource(config, opts.source ?? config.feed.source).feed;
        const rows = await withStore(config, logger, (store) => listSuppressions(store, source));
        process.stdout.write(opts.json ? `${JSON.stringify(rows.map(asJson))}\n` : table(source, rows));
        return 0;
      }, stdoutIsTheAnswer),
    );
  suppressions
    .command('remove <address>')
    .description(
      'Send to this address again: delete its suppression for the source. A new bounce, complaint or ' +
        'unsubscribe suppresses it again; the events already stored do not.',
    )
    .option(...sourceOption)
    .addHelpText(
      'after',
      '\nThe address is matched trimmed and lower-cased, as the records keep it. The removal is logged with\n' +
        'the source and the reason it had, not the address.\n' +
        'Exit codes: 0 removed, or not suppressed (it says so), 1 runtime failure (Postgres), 2 not an\n' +
        'address, or another usage or configuration error.',
    )
    .action(
      action(async ({ config, logger }, address: string, opts: { source?: string }) => {
        const { removeSuppression } = await import('../../store/suppressions.js');
        const { source } = configForSource(config, opts.source ?? config.feed.source).feed;
        const wanted = address.trim();
        // The address stays out of the error: `action` logs its line at debug.
        if (!isAddress(wanted)) {
          throw new ConfigError(
            'suppressions remove: the argument is not an email address (local@domain)',
            'USAGE',
          );
        }
        const removed = await withStore(config, logger, (store) => removeSuppression(store, source, wanted));
        if (removed === null) {
          process.stdout.write(`${wanted} is not suppressed for source ${source}: nothing removed\n`);
          return 0;
        }
        logger
          .child({ module: 'suppressions' })
          .info(
            { source, reason: removed.reason, eventId: removed.eventId },
            'suppression removed by hand: the address may be sent to again',
          );
        process.stdout.write(
          `removed ${removed.address} from the suppressions of source ${source} (it was ${removed.reason}, ` +
            `by event ${removed.eventId} of ${removed.at.toISOString()})\n`,
        );
        return 0;
      }, stdoutIsTheAnswer),
    );
  return suppressions;
}

function asJson(s: Suppression): Record<string, string> {
  return {
    source: s.source,
    address: s.address,
    reason: s.reason,
    event_id: s.eventId,
    at: s.at.toISOString(),
  };
}

function table(source: string, rows: readonly Suppression[]): string {
  if (rows.length === 0) return `source ${source}: no suppressed addresses\n`;
  const width = Math.max(...rows.map((r) => r.address.length), 'address'.length);
  const line = (address: string, reason: string, at: string, event: string) =>
    `${address.padEnd(width)}  ${reason.padEnd(12)}  ${at.padEnd(24)}  ${event}`;
  return `${[
    `source ${source}: ${rows.length} suppressed ${rows.length === 1 ? 'address' : 'addresses'}`,
    line('address', 'reason', 'at', 'event'),
    ...rows.map((r) => line(r.address, r.reason, r.at.toISOString(), r.eventId)),
  ].join('\n')}\n`;
}
