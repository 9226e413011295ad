import { Command } from 'commander';
import { logRetries } from '../../api/retry.js';
import type { Config } from '../../config/config-type.js';
import { ConfigError, FeedsyncError } from '../../errors.js';
import { unknownEventReason } from '../../feed/known-event.js';
import { shellQuote } from '../../shell-quote.js';
import type { Store } from '../../store/db.js';
import { action } from '../context.js';
import { knownSourceConfig } from '../known-source.js';
import { withStore } from '../with-store.js';

const sourceOption = [
  '--source <source>',
  'the cursor key: FEED_SOURCE, a source of FEED_SOURCES_FILE, or one with a stored cursor (default FEED_SOURCE)',
] as const;

export function cursorCommand(): Command {
  return new Command('cursor')
    .description("Inspect or move a source's cursor (to replay the feed).")
    .addHelpText('after', "\nExit codes: each subcommand's --help lists its own; without a subcommand, 2.")
    .addCommand(showCommand())
    .addCommand(setCommand())
    .addCommand(resetCommand());
}

function showCommand(): Command {
  return new Command('show')
    .description('Print the cursor: the id read after, the type filter, the last success.')
    .option(...sourceOption)
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nExit codes: 0 printed, 1 runtime failure (Postgres), 2 usage or configuration error.',
    )
    .action(
      action(async ({ config, logger }, opts: { source?: string; json?: boolean }) => {
        const { getCursor } = await import('../../store/cursor.js');
        // An unknown source is a usage error (exit 2), as for set and reset.
        const { source } = (await knownSourceConfig(config, logger, opts.source)).feed;
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
}

function setCommand(): Command {
  return new Command('set')
    .argument('<event-id>')
    .description(
      'Move the cursor so that the next run reads after this event id (the filter is kept). The id is ' +
        'checked against the feed first, so it needs FEED_BASE_URL and FEED_API_KEY. With ' +
        'EVENTS_RETENTION_DAYS set, the id must be a stored event inside the retention.',
    )
    .option(...sourceOption)
    .addHelpText(
      'after',
      `\nExit codes: 0 moved, 1 runtime failure (the feed or Postgres), 2 an empty id, an id\nthe feed does not know, or another usage or configuration error (the cursor is left where it was),\n3 key rejected.`,
    )
    .action(
      action(async ({ config, logger }, eventId: string, opts: { source?: string }) => {
        const { setCursor } = await import('../../store/cursor.js');
        const { feedReaderFor } = await import('../../compose/parts.js');
        const { assertEventWithinRetention } = await import('../../store/retention-guard.js');
        const own = await knownSourceConfig(config, logger, opts.source);
        const { source } = own.feed;
        if (eventId.trim() === '') {
          throw new ConfigError(
            `cursor set: the event id is empty; to start over use "feedsync cursor reset --source ${shellQuote(source)}"`,
            'USAGE',
          );
        }
        // Asked of this source's own feed (its base URL and key, when the sources file gives them).
        const probe = feedReaderFor(own, {
          limit: 1,
          retryDeps: { onRetry: logRetries(logger.child({ module: 'cursor' })) },
        });
        let unknown: string | null;
        try {
          unknown = await unknownEventReason(probe.fetchPage, eventId);
        } finally {
          await probe.close();
        }
        if (unknown !== null) {
          throw new ConfigError(
            `cursor set: the feed does not know the event id ${eventId} (${unknown}); the cursor was not moved`,
            'UNKNOWN_EVENT_ID',
          );
        }
        await withStore(config, logger, async (store) => {
          await assertEventWithinRetention(store, source, eventId, 'cursor set', config.eventsRetentionDays);
          await underLease(config, store, source, (token) =>
            setCursor(store, source, eventId, undefined, token),
          );
        });
        process.stdout.write(`source ${source}: the next run reads after ${eventId}\n`);
        return 0;
      }),
    );
}

function resetCommand(): Command {
  return new Command('reset')
    .description(
      "Start the source over from the beginning of the feed, with its current types (the file's, else FEED_TYPES).",
    )
    .option(...sourceOption)
    .option(
      '--allow-key-change',
      "also forget the kind of API key (test or live) the cursor was built with: the next run records its key's",
    )
    .addHelpText(
      'after',
      '\nExit codes: 0 reset, 1 runtime failure (Postgres), 2 usage or configuration error.',
    )
    .action(
      action(async ({ config, logger }, opts: { source?: string; allowKeyChange?: boolean }) => {
        const { setCursor, forgetKeyKind } = await import('../../store/cursor.js');
        const { source, types } = (await knownSourceConfig(config, logger, opts.source)).feed;
        await withStore(config, logger, (store) =>
          underLease(config, store, source, async (token) => {
            const moved = await setCursor(store, source, null, types, token);
            if (moved && opts.allowKeyChange) await forgetKeyKind(store, source);
            return moved;
          }),
        );
        process.stdout.write(
          `source ${source}: reset to the start of the feed (types ${types?.join(',') ?? 'all'}` +
            `${opts.allowKeyChange ? '; the next run records the kind of its key' : ''}); stored events are de-duplicated\n`,
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
}

/**
 * Moves a cursor as a worker would: under the source's lease, fenced by its token, so
 * that a turn in flight is never overtaken in the middle. Waits up to SOURCE_LEASE_MS
 * for a turn to give the lease back.
 */
async function underLease(
  config: Config,
  store: Store,
  source: string,
  move: (token: string) => Promise<boolean>,
): Promise<void> {
  const { withLease } = await import('../../store/lease.js');
  const { leaseHolderOf } = await import('../../store/lease-statements.js');
  const { leaseOptionsFor } = await import('../../compose/parts.js');
  const opts = { ...leaseOptionsFor(config), waitMs: config.sourceLeaseMs };
  // A wait of up to SOURCE_LEASE_MS says what it waits for.
  const busy = await leaseHolderOf(store, source);
  if (busy) {
    process.stderr.write(
      `feedsync: source ${source} is being synced by ${busy.holder} (its lease runs to ${busy.expiresAt.toISOString()}); ` +
        `waiting up to ${Math.ceil(opts.waitMs / 1000)} s for its turn to end\n`,
    );
  }
  const done = await withLease(store, source, opts, (lease) => move(lease.token));
  if (done?.value === true) return;
  const now = done ? null : await leaseHolderOf(store, source);
  throw new FeedsyncError(
    now
      ? `source ${source} is being synced by ${now.holder} (its lease runs to ${now.expiresAt.toISOString()}); ` +
          'the cursor was not moved: try again when its turn has ended'
      : `source ${source}: another worker took the lease while the cursor was being moved; it was not moved: try again`,
    { code: 'SOURCE_HELD' },
  );
}
