import type { Config } from '../config.js';
import type { Publisher } from '../queue/publisher.js';
import { advisoryKey } from '../store/advisory-key.js';
import { quoteSchema, type Store } from '../store/db.js';

export interface SourceStatus {
  source: string;
  cursor: string | null;
  types: string[] | null;
  lastSuccessAt: string | null;
  eventsStored: number;
  newestEventAt: string | null;
  /** Seconds from the newest stored event's created_at to now; null while nothing is stored. */
  lagSeconds: number | null;
  /** The application_name (a worker's host name) of the session holding the source's lock now; null when none does. */
  lockHolder: string | null;
  outboxBacklog: number;
  quarantined: number;
  /** Event ids served again with other content (the first version kept). */
  conflicts: number;
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
): Promise<StatusReport> {
  const s = quoteSchema(store.schema);
  const { rows } = await store.pool.query<{
    source: string;
    after_id: string | null;
    types: string[] | null;
    last_success_at: Date | null;
    events: string;
    newest: Date | null;
    backlog: string;
    quarantined: string;
    conflicts: string;
  }>(
    `WITH sources AS (
       SELECT unnest($1::text[]) AS source UNION SELECT source FROM ${s}.cursors
       UNION SELECT DISTINCT source FROM ${s}.outbox WHERE published_at IS NULL
       UNION SELECT DISTINCT source FROM ${s}.quarantine UNION SELECT DISTINCT source FROM ${s}.conflicts
     )
     SELECT src.source, c.after_id, c.types, c.last_success_at,
       (SELECT count(*) FROM ${s}.events e WHERE e.source = src.source) AS events,
       (SELECT max(created_at) FROM ${s}.events e WHERE e.source = src.source AND e.created_at <= now()) AS newest,
       (SELECT count(*) FROM ${s}.outbox o WHERE o.source = src.source AND o.published_at IS NULL) AS backlog,
       (SELECT count(*) FROM ${s}.quarantine q WHERE q.source = src.source) AS quarantined,
       (SELECT count(*) FROM ${s}.conflicts k WHERE k.source = src.source) AS conflicts
     FROM sources src LEFT JOIN ${s}.cursors c ON c.source = src.source ORDER BY src.source`,
    [config.sources.map((c) => c.source)],
  );
  const holders = await lockHolders(store);
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
      lockHolder: holders.get(advisoryKey('feedsync.source', store.schema, r.source).join(':')) ?? null,
      outboxBacklog: Number(r.backlog),
      quarantined: Number(r.quarantined),
      conflicts: Number(r.conflicts),
    })),
    queues,
  };
}

/**
 * The advisory locks of this database held now, keyed `k1:k2` like advisoryKey's
 * halves, with the application_name of the holding session (a worker sets it to its
 * host name). pg_locks shows the int4 halves as unsigned oids.
 */
async function lockHolders(store: Store): Promise<Map<string, string>> {
  const { rows } = await store.pool.query<{ k1: number; k2: number; holder: string }>(
    `SELECT l.classid::bigint AS k1, l.objid::bigint AS k2, a.application_name AS holder
       FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
  );
  const signed = (n: number | string): number => Number(n) | 0;
  return new Map(rows.map((r) => [`${signed(r.k1)}:${signed(r.k2)}`, r.holder || '(unnamed session)']));
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
      `  lock held by    ${s.lockHolder ?? 'nobody (no run in flight)'}`,
      `  outbox backlog  ${s.outboxBacklog}`,
      `  quarantined     ${s.quarantined}`,
      `  conflicts       ${s.conflicts}`,
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
