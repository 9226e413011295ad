import type { Config } from '../config/config-type.js';
import { secretsOf } from '../config/secrets.js';
import type { Publisher } from '../queue/publisher.js';
import { scrubText } from '../scrub.js';
import type { Store } from '../store/db.js';
import { outboxBacklogBySource } from '../store/outbox.js';
import {
  type FleetCounts,
  LAGGING_AFTER_SECONDS,
  type StatusFilter,
  type StatusRow,
  sourcesWithRecords,
  statusRows,
} from '../store/source-states.js';

/** How many sources `status` lists unless told `--all`. */
export const STATUS_LIST_LIMIT = 50;

export interface SourceStatus {
  source: string;
  cursor: string | null;
  types: string[] | null;
  lastSuccessAt: string | null;
  eventsStored: number;
  newestEventAt: string | null;
  /** Seconds from the newest stored event's created_at to now; null while nothing is stored. */
  lagSeconds: number | null;
  /** The worker holding the source's lease now (host name/pid), its fencing token and when it runs out; null when free. */
  lease: { holder: string; token: string; expiresAt: string } | null;
  /**
   * When its next turn is due (an interval after its last, or its back-off): a watch
   * loop runs it then; null when it is due now, or never ran, or a turn is in flight.
   */
  nextDueAt: string | null;
  /** Whether its last turn was a once run's (a CronJob's) or a watch's; null: not recorded. */
  lastTurnBy: 'once' | 'watch' | null;
  /** Turns of the source in a row that failed (its lease row's count); 0 after a good one. */
  failuresInRow: number;
  /** Why its last turn failed, while it keeps failing (a key file missing, a rejected key…); null otherwise. */
  lastError: string | null;
  /**
   * A source of the file due for longer than SYNC_INTERVAL_MS that no worker claimed (or
   * with no lease row yet): the replicas do not keep up, or none runs it. Also counted by
   * feedsync_sources_overdue.
   */
  overdue: boolean;
  outboxBacklog: number;
  quarantined: number;
  /** Versions of stored event ids served again with other content (the first version kept). */
  conflicts: number;
  /** The event ids they came under: one conflicts row each, with its newest other version. */
  conflictIds: number;
  /** The last `feedsync verify` that read up to the cursor; null when none did. */
  lastVerify: {
    finishedAt: string;
    /** Nothing missing or differing. */
    ok: boolean;
    missing: number;
    differing: number;
    /** Of the missing, those its --repair stored. */
    repaired: number;
  } | null;
}

export interface StatusReport {
  schema: string;
  /** Every source (of the sources file and of the tables) by state, whatever the filter. */
  summary: FleetCounts & { laggingAfterSeconds: number };
  filter: StatusFilter;
  /** Those the filter kept, worst first (failing, then lagging, then never caught up, then by name), up to the limit. */
  sources: SourceStatus[];
  /** Sources the filter kept that the limit left out (`--all` lists them). */
  omitted: number;
  /** Job counts per queue, or null where Redis did not answer. */
  queues: Record<string, Record<string, number> | null>;
}

export interface StatusOptions {
  /** That source alone (`status --source`). */
  only?: string;
  filter?: StatusFilter;
  /** At most this many listed; null: every one (`--all`). Default STATUS_LIST_LIMIT. */
  limit?: number | null;
}

/**
 * What `feedsync status` shows: every source (of the sources file and of the tables)
 * counted by state, then those the filter keeps, worst first and at most `limit`, then
 * per queue. One statement over rows kept per source (source-states.ts), never a count
 * over events: its cost grows with the sources, not with the events they stored.
 */
export async function statusReport(
  config: Config,
  store: Store,
  publisher: Publisher,
  opts: StatusOptions = {},
): Promise<StatusReport> {
  const filter = opts.filter ?? null;
  const limit = opts.limit === undefined ? STATUS_LIST_LIMIT : opts.limit;
  // Asked first: a source with a backlog is listed even when no other table names it;
  // so is one with quarantined items or conflicts only (small tables, read by their index).
  const backlog = await outboxBacklogBySource(store);
  const names = new Set([
    ...config.sources.map((c) => c.source),
    ...backlog.keys(),
    ...(await sourcesWithRecords(store)),
  ]);
  const rows = await statusRows(store, filter, {
    names: [...names],
    only: opts.only ?? null,
    limit,
    intervalMs: config.syncIntervalMs,
  });
  const queues: StatusReport['queues'] = {};
  for (const name of [config.queues.emailEvents, config.queues.contactEvents]) {
    queues[name] = await publisher.counts(name).catch(() => null);
  }
  const first = rows[0]!;
  const listed = rows.filter((r): r is StatusRow & { source: string } => r.source !== null);
  return {
    schema: store.schema,
    summary: {
      sources: Number(first.sources),
      failing: Number(first.failing_n),
      lagging: Number(first.lagging_n),
      neverSucceeded: Number(first.never_n),
      laggingAfterSeconds: LAGGING_AFTER_SECONDS,
    },
    filter,
    sources: listed.map((r) => ({
      source: r.source,
      cursor: r.after_id,
      types: r.types,
      lastSuccessAt: r.last_success_at?.toISOString() ?? null,
      eventsStored: Number(r.events_stored ?? 0),
      newestEventAt: r.newest_event_at?.toISOString() ?? null,
      lagSeconds: r.newest_event_at
        ? Math.max(0, Math.round((Date.now() - r.newest_event_at.getTime()) / 1000))
        : null,
      // A lease that ran out (by Postgres's clock) is nobody's, whatever the row still names.
      lease:
        r.live && r.holder !== null && r.token !== null && r.expires_at !== null
          ? { holder: r.holder, token: r.token, expiresAt: r.expires_at.toISOString() }
          : null,
      // By Postgres's clock, as the claims that run it.
      nextDueAt: !r.live && r.due_later && r.due_at !== null ? r.due_at.toISOString() : null,
      lastTurnBy: r.last_turn,
      failuresInRow: r.failures ?? 0,
      // Scrubbed again when shown: a row may have been written before scrubbing, or by hand.
      lastError: r.last_error === null ? null : scrubText(r.last_error, secretsOf(config)),
      overdue: r.overdue ?? false,
      outboxBacklog: backlog.get(r.source) ?? 0,
      quarantined: Number(r.quarantined ?? 0),
      conflicts: Number(r.conflicts ?? 0),
      conflictIds: Number(r.conflict_ids ?? 0),
      lastVerify:
        r.verified_at === null
          ? null
          : {
              finishedAt: r.verified_at.toISOString(),
              ok: r.verify_ok === true,
              missing: r.verify_missing ?? 0,
              differing: r.verify_differing ?? 0,
              repaired: r.verify_repaired ?? 0,
            },
    })),
    omitted: Number(first.matched) - listed.length,
    queues,
  };
}

/** When the source runs next, as the text says it: a once run's source runs at the next once run (a CronJob's). */
function nextTurn(s: StatusReport['sources'][number]): string {
  if (s.lease) return 'after the turn in flight';
  if (s.lastTurnBy === 'once') {
    return `at the next sync --once (its last turn was one)${s.nextDueAt ? `; a sync --watch would take it at ${s.nextDueAt}` : ''}`;
  }
  return s.nextDueAt ?? 'due now';
}

/** The report as aligned text for a person. */
export function formatStatus(report: StatusReport): string {
  const { summary: sum } = report;
  const lines = [`schema ${report.schema}`];
  if (sum.sources === 0) lines.push('no source has run yet');
  else
    lines.push(
      `sources ${count(sum.sources)}: ${count(sum.failing)} failing, ${count(sum.lagging)} lagging ` +
        `(newest event over ${sum.laggingAfterSeconds / 60} min old), ${count(sum.neverSucceeded)} never caught up`,
    );
  if (report.filter !== null && report.sources.length === 0) lines.push(`no source is ${report.filter}`);
  for (const s of report.sources) {
    lines.push(
      `source ${s.source}`,
      `  cursor          ${s.cursor ?? '(start)'}`,
      `  types           ${s.types?.join(',') ?? 'all'}`,
      `  last success    ${s.lastSuccessAt ?? 'never'}`,
      `  events stored   ${s.eventsStored}${s.newestEventAt ? ` (newest ${s.newestEventAt}, lag ${s.lagSeconds} s)` : ''}`,
      `  lease           ${s.lease ? `${s.lease.holder}, token ${s.lease.token}, until ${s.lease.expiresAt}` : 'free (no turn in flight)'}`,
      `  next turn       ${nextTurn(s)}`,
      ...(s.failuresInRow > 0
        ? [
            `  failing         ${s.failuresInRow} turn${s.failuresInRow === 1 ? '' : 's'} in a row: ${s.lastError ?? 'unknown error'}`,
          ]
        : []),
      ...(s.overdue ? ['  overdue         due for over SYNC_INTERVAL_MS, not claimed by any worker'] : []),
      `  outbox backlog  ${s.outboxBacklog}`,
      `  quarantined     ${s.quarantined}`,
      `  conflicts       ${s.conflicts}${s.conflicts > 0 ? ` (${s.conflictIds} event id${s.conflictIds === 1 ? '' : 's'})` : ''}`,
      `  last verify     ${lastVerify(s.lastVerify)}`,
    );
  }
  if (report.omitted > 0) {
    const flag = report.filter === null ? '--all' : `--${report.filter} --all`;
    lines.push(`… and ${count(report.omitted)} more; ${flag} lists them`);
  }
  for (const [queue, counts] of Object.entries(report.queues)) {
    const text = counts
      ? Object.entries(counts)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ')
      : 'Redis unreachable';
    lines.push(`queue ${queue}: ${text}`);
  }
  return `${lines.join('\n')}\n`;
}

/** A source's last verify in one line: when, and what it found. */
function lastVerify(v: SourceStatus['lastVerify']): string {
  if (v === null) return 'never';
  const found = `${v.missing} missing${v.repaired > 0 ? ` (${v.repaired} repaired)` : ''}, ${v.differing} differing`;
  return `${v.finishedAt} ${v.ok ? 'ok' : `NOT OK: ${found}`}`;
}

/** 99950 as "99,950". */
function count(n: number): string {
  return n.toLocaleString('en-US');
}
