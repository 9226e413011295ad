import { Command, InvalidArgumentError } from 'commander';
import { loadConfig } from '../../config/config.js';
import type { Config } from '../../config/config-type.js';
import { formatReport } from '../../doctor/report.js';
import { ConfigError } from '../../errors.js';
import { createLogger } from '../../logger.js';
import { knownSourceConfig } from '../known-source.js';

/** A whole number of milliseconds, at least 1: anything else is a usage error (exit 2), never NaN. */
function milliseconds(value: string): number {
  if (!/^\d+$/.test(value.trim()) || Number(value) < 1) {
    throw new InvalidArgumentError('must be a whole number of milliseconds, at least 1');
  }
  return Number(value);
}

/**
 * Why doctor cannot check `source`: a name not in FEED_SOURCES_FILE (`inFile`), or,
 * with no file, neither FEED_SOURCE nor a source with a stored cursor, as every command
 * that takes --source asks. A configuration that does not load, or a Postgres that does
 * not answer, is no reason here: doctor reports them as findings.
 */
async function unknownName(
  load: () => Config,
  source: string,
  inFile: (load: () => Config, source: string) => string | null,
): Promise<string | null> {
  let config: Config;
  try {
    config = load();
  } catch {
    return null;
  }
  const refused = inFile(() => config, source);
  if (refused !== null) return refused;
  try {
    await knownSourceConfig(config, createLogger({ level: 'silent' }), source);
    return null;
  } catch (err) {
    return err instanceof ConfigError ? err.message : null;
  }
}

export function doctorCommand(): Command {
  return (
    new Command('doctor')
      .description(
        'Check configuration, Postgres and the schema, the cursor and type filter, the feed and key, ' +
          'Redis and its maxmemory-policy, the queues, outbox, quarantine and recorded conflicts; say how to fix what is wrong.',
      )
      .option('--json', 'print JSON: {ok, checks: [{name, status, message, fix?}]}')
      .option(
        '--receiver',
        'check a deployment that runs serve-webhooks alone: WEBHOOK_SECRET instead of the feed',
      )
      .option('--timeout-ms <ms>', 'longest wait for each service', milliseconds, 5000)
      .option(
        '--source <name>',
        'check this source alone (one of FEED_SOURCES_FILE, else FEED_SOURCE or a source with a stored cursor); default every source',
      )
      .addHelpText(
        'after',
        '\nOne line per check: ok, warn, fail, or skip (could not run because an earlier check failed).\n' +
          'The feed check needs FEED_BASE_URL and FEED_API_KEY; a stored cursor is asked about at the feed.\n' +
          'With FEED_SOURCES_FILE, each source gets its own feed and cursor line ("feed <source>"), checked 8 at\n' +
          'once within 8 times --timeout-ms; a source not reached by then is a skip line.\n' +
          'Exit codes: 0 only when every check is ok, 1 when any warns, fails or could not run (a warning is\n' +
          'something to fix too, such as an evicting Redis), 2 usage error (an unknown --source among them).\n' +
          'Secrets are never printed.',
      )
      // No action() wrapper: a configuration that does not load is a finding here, not a reason to stop.
      .action(async (opts: { json?: boolean; receiver?: boolean; timeoutMs: number; source?: string }) => {
        const [{ runDoctor }, { unknownSource }] = await Promise.all([
          import('../../doctor/doctor.js'),
          import('../../doctor/sources.js'),
        ]);
        // The report lists the warnings of the variables itself: loading gives none of its own.
        const load = () => loadConfig(process.env, undefined, { warn: () => {} });
        // An unknown --source is a usage error (exit 2), as for every command that takes one.
        const refused =
          opts.source === undefined ? null : await unknownName(load, opts.source, unknownSource);
        if (refused !== null) {
          process.stderr.write(`feedsync: ${refused}\n`);
          process.exitCode = 2;
          return;
        }
        const report = await runDoctor({
          load,
          ...(opts.source === undefined ? {} : { source: opts.source }),
          env: process.env,
          timeoutMs: opts.timeoutMs,
          mode: opts.receiver ? 'receiver' : 'sync',
        });
        process.stdout.write(opts.json ? `${JSON.stringify(report, null, 2)}\n` : formatReport(report));
        process.exitCode = report.ok ? 0 : 1;
      })
  );
}
