import { Command } from 'commander';
import type { Config } from '../../config/config-type.js';
import { sourceNameProblem } from '../../config/sources-file.js';
import { ConfigError, FeedsyncError } from '../../errors.js';
import type { SourceRefusal } from '../../store/source-admin.js';
import { action } from '../context.js';
import { withStore } from '../with-store.js';

/**
 * `feedsync sources retire|rename|reuse`: a source taken out of the fleet, or given a new
 * name without reading and publishing its feed again (docs/SCALING.md, Sources come and
 * go), and the mark either leaves lifted.
 */
export function sourcesCommand(): Command {
  return new Command('sources')
    .description(
      'Retire a source that is gone, or rename one without reading its feed again (or let a name be used again).',
    )
    .addHelpText('after', "\nExit codes: each subcommand's --help lists its own; without a subcommand, 2.")
    .addCommand(retireCommand())
    .addCommand(renameCommand())
    .addCommand(reuseCommand());
}

function retireCommand(): Command {
  return new Command('retire')
    .argument('<source>')
    .description(
      'Take a source out of the fleet: delete its lease row, cursor, counts, quarantine and conflicts, so that ' +
        'status, feedsync_sources and feedsync_sources_overdue no longer count it. Its events and records stay ' +
        'until retention prunes them.',
    )
    .addHelpText(
      'after',
      '\nRemove the source from FEED_SOURCES_FILE on every replica first. A replica whose file still names it\n' +
        'refuses it from then on (SOURCE_RETIRED, in its log and status) and reads nothing of its feed;\n' +
        '"feedsync sources reuse" lifts that. Refused while a worker holds its lease, or while its outbox holds\n' +
        'events not yet handed to the queues (run a sync of it first).\n' +
        'Exit codes: 0 retired, 1 runtime failure (Postgres), or a worker holds its lease (try again),\n' +
        '2 still configured, unknown, a backlog to hand off, or another usage or configuration error.',
    )
    .action(
      action(async ({ config, logger }, source: string) => {
        const { retireSource } = await import('../../store/source-admin.js');
        notConfigured(config, source, 'retire');
        const result = await withStore(config, logger, (store) => retireSource(store, source));
        if (result.refused !== undefined) throw refusal(source, result);
        logger.child({ module: 'sources' }).info({ source, ...result }, 'source retired');
        process.stdout.write(
          `retired source ${source}: lease row ${result.lease ? 'deleted' : 'none'}, cursor ${result.cursor ? 'deleted' : 'none'}, ` +
            `${result.quarantined} quarantined and ${result.conflicts} conflict rows deleted; its events and records ` +
            'stay until retention prunes them\n',
        );
        return 0;
      }),
    );
}

function renameCommand(): Command {
  return new Command('rename')
    .argument('<old>')
    .argument('<new>')
    .description(
      'Give a source a new name, its cursor, events, records (email_status, contact_status, suppressions), ' +
        'outbox, quarantine and conflicts moved in one transaction: the new name goes on from the cursor.',
    )
    .addHelpText(
      'after',
      '\nStop syncing <old> first: take it out of FEED_SOURCES_FILE (or FEED_SOURCE) on every replica, run this,\n' +
        'then add <new> with the same account. Jobs published before keep their ids (<old>/<event id>); the\n' +
        "events synced after are <new>/<event id>, each once. Refused while a worker holds <old>'s lease.\n" +
        'A replica whose file still names <old> refuses it from then on (SOURCE_RETIRED, in its log and\n' +
        'status) and reads nothing of its feed, which it would otherwise store again from the start.\n' +
        'Exit codes: 0 renamed, 1 runtime failure (Postgres), or a worker holds the lease (try again),\n' +
        '2 <old> still configured or unknown, <new> already used, or another usage or configuration error.',
    )
    .action(
      action(async ({ config, logger }, from: string, to: string) => {
        const { renameSource } = await import('../../store/source-admin.js');
        notConfigured(config, from, 'rename');
        const problem = sourceNameProblem(to);
        if (problem)
          throw new ConfigError(`sources rename: source ${JSON.stringify(to)}: ${problem}`, 'USAGE');
        const result = await withStore(config, logger, (store) => renameSource(store, from, to));
        if (result.refused !== undefined) throw refusal(from, result, to);
        const moved = Object.entries(result.moved)
          .filter(([, n]) => n > 0)
          .map(([table, n]) => `${n} ${table}`);
        logger
          .child({ module: 'sources' })
          .info({ source: from, renamedTo: to, moved: result.moved }, 'source renamed');
        process.stdout.write(
          `renamed source ${from} to ${to}: moved ${moved.length === 0 ? 'nothing' : moved.join(', ')}\n`,
        );
        return 0;
      }),
    );
}

function reuseCommand(): Command {
  return new Command('reuse')
    .argument('<source>')
    .description(
      'Let a sources file name a renamed or retired source again: its next turn starts a new cursor at the ' +
        'start of the feed under that name (what a replica refuses, SOURCE_RETIRED, until then).',
    )
    .addHelpText(
      'after',
      '\nExit codes: 0 the mark was lifted, 2 the name has no mark (it was never renamed or retired), or\n' +
        'another usage or configuration error; 1 runtime failure (Postgres).',
    )
    .action(
      action(async ({ config, logger }, source: string) => {
        const { reuseSource } = await import('../../store/source-admin.js');
        const problem = sourceNameProblem(source);
        if (problem)
          throw new ConfigError(`sources reuse: source ${JSON.stringify(source)}: ${problem}`, 'USAGE');
        if (!(await withStore(config, logger, (store) => reuseSource(store, source)))) {
          throw new ConfigError(
            `sources reuse: source ${source} was never renamed or retired: nothing to do`,
            'USAGE',
          );
        }
        logger.child({ module: 'sources' }).info({ source }, 'source name free again');
        process.stdout.write(
          `source ${source} may be named again; its next turn reads its feed from the start\n`,
        );
        return 0;
      }),
    );
}

/** A source this process's configuration still runs would get its lease row back at once. */
function notConfigured(config: Config, source: string, verb: string): void {
  const problem = sourceNameProblem(source);
  if (problem)
    throw new ConfigError(`sources ${verb}: source ${JSON.stringify(source)}: ${problem}`, 'USAGE');
  const configured =
    config.sourcesFile === null
      ? config.feed.source === source
        ? 'FEED_SOURCE'
        : null
      : config.sources.some((s) => s.source === source)
        ? 'FEED_SOURCES_FILE'
        : null;
  if (configured !== null) {
    throw new ConfigError(
      `sources ${verb}: source ${source} is still in ${configured}: take it out there (on every replica) first`,
      'USAGE',
    );
  }
}

function refusal(source: string, r: SourceRefusal, to?: string): FeedsyncError {
  switch (r.refused) {
    case 'unknown':
      return new ConfigError(`source ${source} has no lease row and no cursor: nothing to do`, 'USAGE');
    case 'held':
      return new FeedsyncError(
        `source ${source} is being synced by ${r.holder} (its lease runs to ${r.expiresAt.toISOString()}); ` +
          'nothing was changed: try again when its turn has ended',
        { code: 'SOURCE_HELD' },
      );
    case 'backlog':
      return new ConfigError(
        `source ${source} has ${r.rows} events in its outbox not yet handed to the queues; nothing was changed: ` +
          `hand them off first (FEED_SOURCE=${source} feedsync sync --once)`,
        'USAGE',
      );
    case 'taken':
      return new ConfigError(
        `source ${to ?? ''} already has rows (a cursor, events or records); nothing was changed: choose another name`,
        'USAGE',
      );
  }
}
