import { Command } from 'commander';
import type { VerifyResult } from '../../sync/verify.js';
import { action } from '../context.js';
import { withSourceSync } from '../source-sync-run.js';

/** The exit code of a verify that found something missing or differing. */
export const VERIFY_FOUND_EXIT = 3;

export function verifyCommand(): Command {
  return new Command('verify')
    .description(
      'Re-read the feed up to the cursor and compare it with the store: events missing (served, not stored, not ' +
        'pruned) and differing (same id, other content). Exit 3 when any is found.',
    )
    .option(
      '--from <event-id>',
      'read after this event id (default: after the oldest event still stored with EVENTS_RETENTION_DAYS, ' +
        'else the start of the feed)',
    )
    .option(
      '--source <source>',
      'FEED_SOURCE, a source of FEED_SOURCES_FILE, or one with a stored cursor (default FEED_SOURCE)',
    )
    .option('--json', 'print the result as JSON')
    .option(
      '--repair',
      'store and hand over the missing events, once, as reconcile does; differing ones are listed, never overwritten',
    )
    .addHelpText(
      'after',
      '\nReads within the same request budget as sync and reconcile, page by page (memory does not grow with\n' +
        'the feed); never moves the cursor. The result is kept for `status` (its last verify). On a terminal a\n' +
        'progress line is redrawn on stderr; logs go to stderr.\n' +
        'Exit codes: 0 nothing missing or differing, 1 runtime failure (the feed, Postgres), 2 usage or\n' +
        'configuration error (an --from the feed does not know), 3 something missing or differing (also\n' +
        'after --repair stored it: run again to confirm), or the key rejected (the error line says so).\n' +
        'A run stopped by SIGTERM answers for what it read, and is not recorded.',
    )
    .action(
      action(
        async (ctx, opts: { from?: string; source?: string; json?: boolean; repair?: boolean }) => {
          const result = await withSourceSync(ctx, opts.source, (sync, signal) =>
            sync.verify({
              repair: opts.repair === true,
              signal,
              ...(opts.from === undefined ? {} : { from: opts.from }),
            }),
          );
          process.stdout.write(opts.json ? `${JSON.stringify(result, null, 2)}\n` : formatVerify(result));
          return result.ok ? 0 : VERIFY_FOUND_EXIT;
        },
        { logTo: process.stderr },
      ),
    );
}

/** The result for a person: what was read, then each class with its count and first ids. */
export function formatVerify(r: VerifyResult): string {
  if (r.status === 'nothing-synced') return `verify ${r.source}: no cursor yet, nothing synced to verify\n`;
  const ids = (first: string[], count: number) =>
    count === 0
      ? ''
      : `  ${first.join(', ')}${count > first.length ? `, … (${count - first.length} more)` : ''}`;
  const lines = [
    `verify ${r.source}${r.status === 'stopped' ? ' (stopped early: not recorded)' : ''}: ${r.checked} events in ` +
      `${r.pages} pages, after ${r.from ?? '(start)'} up to the cursor ${r.cursor}`,
    `  missing     ${r.missing.count}${ids(r.missing.first, r.missing.count)}`,
    `  differing   ${r.differing.count}${ids(r.differing.first, r.differing.count)}${r.differing.count > 0 ? ' (kept as stored)' : ''}`,
    `  pruned      ${r.pruned} (older than EVENTS_RETENTION_DAYS: not missing)`,
    ...(r.repaired > 0 ? [`  repaired    ${r.repaired} stored and handed over`] : []),
    r.ok
      ? 'ok: the store matches the feed'
      : 'NOT OK: see docs/RUNBOOK.md, "verify found events missing or differing"',
  ];
  return `${lines.join('\n')}\n`;
}
