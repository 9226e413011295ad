import type { Config } from '../config/config.js';
import type { Publisher } from '../queue/publisher.js';
import { quoteSchema, type Store } from '../store/db.js';
import { outboxBacklogBySource } from '../store/outbox.js';

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
}

export interface StatusReport {
  schema: string;
  sources: SourceStatus[];
  /** Job counts per queue, or null where Redis did not answer. */
  queues: Record<string, Record<string, number> | null>;
}

/** What `feedsync status` shows: per source (of the sources file and of the tables), then per queue. */
export async function statusReport(
  config: Config,
  store: Store,
  publisher: Publisher,
  /** `only`: that source alone (`status --source`). */
  opts: { only?: string } = {},
): Promise<StatusReport> {
  const s = quoteSchema(store.schema);
  // Asked first: a source with a backlog is listed even when no other table names it.
  const backlog = await outboxBacklogBySource(store);
  const { rows } = await store.pool.query<{
    source: string;
    after_id: string | null;
    types: string[] | null;
    last_success_at: Date | null;
    events: string;
    newest: Date | null;
    quarantined: string;
    conflicts: string;
    conflict_ids: string;
    holder: string | null;
    token: string | null;
    expires_at: Date | null;
    live: boolean | null;
    failures: number | null;
    last_error: string | null;
    overdue: boolean;
    due_at: Date | null;
    due_later: boolean | null;
  }>(
    `WITH sources AS (
       SELECT unnest($1::text[]) AS source UNION SELECT source FROM ${s}.cursors
       UNION SELECT DISTINCT source FROM ${s}.quarantine UNION SELECT DISTINCT source FROM ${s}.conflicts
     )
     SELECT src.source, c.after_id, c.types, c.last_success_at,
       l.holder, l.token::text AS token, l.expires_at, l.expires_at > now() AS live, l.failures, l.last_error,
       src.source = ANY ($1::text[]) AND coalesce(CASE WHEN l.holder IS NULL THEN l.due_at ELSE l.expires_at END,
         '-infinity') < now() - $3::int * interval '1 millisecond' AS overdue,
       l.due_at, l.due_at > now() AS due_later,
       (SELECT count(*) FROM ${s}.events e WHERE e.source = src.source) AS events,
       (SELECT max(created_at) FROM ${s}.events e WHERE e.source = src.source AND e.created_at <= now()) AS newest,
       (SELECT count(*) FROM ${s}.quarantine q WHERE q.source = src.source) AS quarantined,
       k.conflicts, k.conflict_ids
     FROM sources src LEFT JOIN ${s}.cursors c ON c.source = src.source
       LEFT JOIN ${s}.leases l ON l.source = src.source
       CROSS JOIN LATERAL (SELECT coalesce(sum(versions_seen), 0) AS conflicts, count(*) AS conflict_ids
         FROM ${s}.conflicts k WHERE k.source = src.source) k
     WHERE $2::text IS NULL OR src.source = $2::text
     ORDER BY src.source`,
    [[...config.sources.map((c) => c.source), ...backlog.keys()], opts.only ?? null, config.syncIntervalMs],
  );
  const queues: StatusReport['queues'] = {};
  for (const name of [config.queues.emailEvents, config.queues.contactEvents]) {
    queues[name] = await publisher.counts(name).catch(() => null);
  }
  return {
    schema: store.schema,
    sources: rows.map((r) => ({
      source: r.source,
      cursor: r.after_id,
      types: r.types,
      lastSuccessAt: r.last_success_at?.toISOString() ?? null,
      eventsStored: Number(r.events),
      newestEventAt: r.newest?.toISOString() ?? null,
      lagSeconds: r.newest ? Math.max(0, Math.round((Date.now() - r.newest.getTime()) / 1000)) : null,
      // A lease that ran out (by Postgres's clock) is nobody's, whatever the row still names.
      lease:
        r.live && r.holder !== null && r.token !== null && r.expires_at !== null
          ? { holder: r.holder, token: r.token, expiresAt: r.expires_at.toISOString() }
          : null,
      // By Postgres's clock, as the claims that run it.
      nextDueAt: !r.live && r.due_later && r.due_at !== null ? r.due_at.toISOString() : null,
      failuresInRow: r.failures ?? 0,
      lastError: r.last_error,
      overdue: r.overdue,
      outboxBacklog: backlog.get(r.source) ?? 0,
      quarantined: Number(r.quarantined),
      conflicts: Number(r.conflicts),
      conflictIds: Number(r.conflict_ids),
    })),
    queues,
  };
}

/** The report as aligned text for a person. */
export function formatStatus(report: StatusReport): string {
  const lines = [`schema ${report.schema}`];
  if (report.sources.length === 0) lines.push('no source has run yet');
  for (const s of report.sources) {
    lines.push(
      `source ${s.source}`,
      `  cursor          ${s.cursor ?? '(start)'}`,
      `  types           ${s.types?.join(',') ?? 'all'}`,
      `  last success    ${s.lastSuccessAt ?? 'never'}`,
      `  events stored   ${s.eventsStored}${s.newestEventAt ? ` (newest ${s.newestEventAt}, lag ${s.lagSeconds} s)` : ''}`,
      `  lease           ${s.lease ? `${s.lease.holder}, token ${s.lease.token}, until ${s.lease.expiresAt}` : 'free (no turn in flight)'}`,
      `  next turn       ${s.lease ? 'after the turn in flight' : (s.nextDueAt ?? 'due now')}`,
      ...(s.failuresInRow > 0
        ? [`  failing         ${s.failuresInRow} turns in a row: ${s.lastError ?? 'unknown error'}`]
        : []),
      ...(s.overdue ? ['  overdue         due for over SYNC_INTERVAL_MS, not claimed by any worker'] : []),
      `  outbox backlog  ${s.outboxBacklog}`,
      `  quarantined     ${s.quarantined}`,
      `  conflicts       ${s.conflicts}${s.conflicts > 0 ? ` (${s.conflictIds} event id${s.conflictIds === 1 ? '' : 's'})` : ''}`,
    );
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
