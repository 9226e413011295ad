import { Command } from 'commander';
import { isAddress } from '../../api/address.js';
import { ConfigError } from '../../errors.js';
import type { SuppressionReason } from '../../store/db.js';
import type { Suppression } from '../../store/suppressions.js';
import { action } from '../context.js';
import { knownSourceConfig } from '../known-source.js';
import { withStore } from '../with-store.js';

const sourceOption = [
  '--source <source>',
  'FEED_SOURCE, a source of FEED_SOURCES_FILE, or one with a stored cursor (default FEED_SOURCE)',
] as const;

/** Logs go to stderr: stdout is the answer to the person who asked (and holds addresses, which logs never do). */
const stdoutIsTheAnswer = { logTo: process.stderr };

/** Rows the text listing shows without --all: a source may hold hundreds of thousands. */
const LIST_LIMIT = 100;

/**
 * `feedsync suppressions list|remove`: the addresses feedsync's records say not to send
 * to (bounced, complained, unsubscribed; docs/DATA.md), and the explicit decision to send
 * to one again. Addresses are printed to the person who asked, never logged.
 */
export function suppressionsCommand(): Command {
  return new Command('suppressions')
    .description(
      'List the addresses not to send to (bounced, complained, unsubscribed), or remove one by hand.',
    )
    .addHelpText('after', "\nExit codes: each subcommand's --help lists its own; without a subcommand, 2.")
    .addCommand(listCommand())
    .addCommand(removeCommand());
}

function listCommand(): Command {
  return new Command('list')
    .description("Print a source's suppressed addresses with their reason and the event that decided it.")
    .option(...sourceOption)
    .option('--json', 'print a JSON array of {source, address, reason, event_id, at}, every row')
    .option('--all', `list every row, not the first ${LIST_LIMIT}`)
    .addHelpText(
      'after',
      `\nThe text listing is bounded: the first ${LIST_LIMIT} rows by address, and how many it left out; --all\n` +
        'lists them all (--json always does).\n' +
        'Exit codes: 0 printed (also when there are none), 1 runtime failure (Postgres), 2 usage or\nconfiguration error.',
    )
    .action(
      action(async ({ config, logger }, opts: { source?: string; json?: boolean; all?: boolean }) => {
        const { listSuppressions } = await import('../../store/suppressions.js');
        const { source } = (await knownSourceConfig(config, logger, opts.source)).feed;
        const limit = opts.json || opts.all ? null : LIST_LIMIT;
        const { rows, total } = await withStore(config, logger, (store) =>
          listSuppressions(store, source, limit),
        );
        process.stdout.write(
          opts.json ? `${JSON.stringify(rows.map(asJson))}\n` : table(source, rows, total),
        );
        return 0;
      }, stdoutIsTheAnswer),
    );
}

function removeCommand(): Command {
  return new Command('remove')
    .argument('<address>')
    .description(
      'Send to this address again: lift its bounce and complaint for the source (or the --reason named). ' +
        'A new bounce, complaint or unsubscribe suppresses it again; the events already stored do not.',
    )
    .option(...sourceOption)
    .option(
      '--reason <reason>',
      'lift only this reason: bounced, complained or unsubscribed; repeat for several (default: bounced and complained)',
      collect,
    )
    .option(
      '--override-unsubscribe',
      "with --reason unsubscribed: send to a contact whose own latest state is unsubscribed (the person's own choice)",
    )
    .addHelpText(
      'after',
      '\nThe address is matched as the records key it (white space and format characters removed, NFC, lower\n' +
        "case). What still stands after the removal is printed: an unsubscribe is the contact's own latest\n" +
        'state, lifted only with --reason unsubscribed --override-unsubscribe. The removal is logged with the\n' +
        'source and the reasons it had, not the address.\n' +
        'Exit codes: 0 removed, or nothing of those reasons there (it says so, and what still stands),\n' +
        '1 runtime failure (Postgres), 2 not an address, an unknown reason, --reason unsubscribed without\n' +
        '--override-unsubscribe, or another usage or configuration error.',
    )
    .action(
      action(async ({ config, logger }, address: string, opts: RemoveFlags) => {
        const { removeSuppressions } = await import('../../store/suppressions.js');
        const { source } = (await knownSourceConfig(config, logger, opts.source)).feed;
        const wanted = address.trim();
        // The address stays out of the error: `action` logs its line at debug.
        if (!isAddress(wanted)) {
          throw new ConfigError(
            'suppressions remove: the argument is not an email address (local@domain)',
            'USAGE',
          );
        }
        const reasons = reasonsToLift(opts);
        const { removed, standing } = await withStore(config, logger, (store) =>
          removeSuppressions(store, source, wanted, reasons),
        );
        if (removed.length === 0) {
          process.stdout.write(
            `${wanted} has no ${reasons.join(' or ')} suppression for source ${source}: nothing removed\n`,
          );
        } else {
          logger.child({ module: 'suppressions' }).info(
            {
              source,
              reasons: removed.map((r) => r.reason),
              eventIds: removed.map((r) => r.eventId),
            },
            'suppression removed by hand',
          );
          for (const r of removed) {
            process.stdout.write(
              `removed ${r.address} from the suppressions of source ${source} (it was ${r.reason}, ` +
                `by event ${r.eventId} of ${r.at.toISOString()})\n`,
            );
          }
        }
        process.stdout.write(
          standing.length === 0
            ? `${wanted} is not suppressed for source ${source}: it may be sent to\n`
            : `${wanted} is still suppressed for source ${source}: ${standing.map(describeStanding).join(', ')}\n`,
        );
        return 0;
      }, stdoutIsTheAnswer),
    );
}

interface RemoveFlags {
  source?: string;
  reason?: string[];
  overrideUnsubscribe?: boolean;
}

const REASONS: readonly SuppressionReason[] = ['bounced', 'complained', 'unsubscribed'];

const collect = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), value];

/** The reasons --reason names (bounced and complained without it), checked. */
function reasonsToLift(opts: RemoveFlags): SuppressionReason[] {
  const named = opts.reason ?? ['bounced', 'complained'];
  const reasons = REASONS.filter((r) => named.includes(r));
  const unknown = named.find((r) => !(REASONS as readonly string[]).includes(r));
  if (unknown !== undefined) {
    throw new ConfigError(
      `suppressions remove: --reason "${unknown}" is none of ${REASONS.join(', ')}`,
      'USAGE',
    );
  }
  if (reasons.includes('unsubscribed') && !opts.overrideUnsubscribe) {
    throw new ConfigError(
      "suppressions remove: an unsubscribe is the contact's own latest state (contact_status): nothing removed; " +
        'pass --override-unsubscribe with --reason unsubscribed to send to the address all the same',
      'USAGE',
    );
  }
  return reasons;
}

function describeStanding(s: Suppression): string {
  const how =
    s.reason === 'unsubscribed'
      ? "the contact's own latest state; lift with --reason unsubscribed --override-unsubscribe"
      : `lift with --reason ${s.reason}`;
  return `${s.reason} (event ${s.eventId} of ${s.at.toISOString()}; ${how})`;
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

function table(source: string, rows: readonly Suppression[], total: number): string {
  if (rows.length === 0) return `source ${source}: no suppressed addresses\n`;
  const left = total - rows.length;
  const addresses = new Set(rows.map((r) => r.address)).size;
  const width = Math.max(...rows.map((r) => r.address.length), 'address'.length);
  const line = (address: string, reason: string, at: string, event: string) =>
    `${address.padEnd(width)}  ${reason.padEnd(12)}  ${at.padEnd(24)}  ${event}`;
  return `${[
    left > 0
      ? `source ${source}: ${total} suppressions; the first ${rows.length} by address`
      : `source ${source}: ${addresses} suppressed ${addresses === 1 ? 'address' : 'addresses'}`,
    line('address', 'reason', 'at', 'event'),
    ...rows.map((r) => line(r.address, r.reason, r.at.toISOString(), r.eventId)),
    ...(left > 0 ? [`… ${left} more rows left out: --all lists them all`] : []),
  ].join('\n')}\n`;
}
