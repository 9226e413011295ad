import pg from 'pg';
import { storeFor } from '../compose/parts.js';
import type { Config } from '../config/config-type.js';
import type { Logger } from '../logger.js';
import { redactUrl } from '../logger.js';
import { shellQuote } from '../shell-quote.js';
import { getCursor } from '../store/cursor.js';
import { quoteSchema, type Store } from '../store/db.js';
import { quarantined, serverPort } from '../store/health.js';
import { schemaState } from '../store/migrate.js';
import { outboxSummary } from '../store/outbox.js';
import { mapBounded } from './bounded.js';
import { conflictsCheck } from './conflicts-check.js';
import { type Check, check } from './report.js';
import { outOfTime, SOURCE_CONCURRENCY, type SourceUnderCheck } from './sources.js';

/** An unpublished outbox row older than this means the relay is not draining. */
const STALE_OUTBOX_MS = 5 * 60_000;

/** The sources whose cursors to check, and how to ask the feed about a stored one. */
export interface CursorTargets {
  sources: readonly SourceUnderCheck[];
  /** Why the source's feed refuses an id (null when it serves it); omitted, stored cursors are not asked about. */
  unknownId?: (source: SourceUnderCheck, id: string) => Promise<string | null>;
  /** A cursor not checked by then (performance.now()) is a skip line. */
  deadline: number;
}

/**
 * Postgres answers, the schema is current, each source's cursor matches its types, the
 * outbox drains, nothing is quarantined, no event came back with other content.
 */
export async function postgresChecks(
  config: Config,
  logger: Logger,
  timeoutMs: number,
  cursors: CursorTargets,
): Promise<Check[]> {
  const cursorNames = cursors.sources.map((s) => `cursor${s.suffix}`);
  const where = redactUrl(config.database.url);
  const reached = await reach(config.database.url, timeoutMs);
  if ('error' in reached) {
    return [
      check(
        'postgres',
        'fail',
        `cannot reach Postgres at ${where}: ${reached.error}`,
        'check DATABASE_URL (host, port, database, user, password) and that the server runs and accepts this client',
      ),
      ...['schema', ...cursorNames, 'outbox', 'quarantine', 'conflicts'].map((name) =>
        check(name, 'skip', 'not checked: Postgres is unreachable'),
      ),
    ];
  }
  const checks = [check('postgres', 'ok', `reachable at ${where}${reached.route}`)];
  const store = storeFor(config, logger, { poolMax: 1, applicationName: 'feedsync-doctor' });
  try {
    const schema = await schemaCheck(store);
    checks.push(schema);
    if (schema.status !== 'ok') {
      for (const name of [...cursorNames, 'outbox', 'quarantine', 'conflicts']) {
        checks.push(check(name, 'skip', 'not checked: the schema is not current'));
      }
      return checks;
    }
    // One connection (max: 1) serves them all; the pool bounds how many feed probes run at once.
    const cursorChecks = await mapBounded(
      cursors.sources,
      SOURCE_CONCURRENCY,
      cursors.deadline,
      (s) => cursorCheck(store, s, cursors.unknownId && ((id) => cursors.unknownId!(s, id))),
      (s) => outOfTime(`cursor${s.suffix}`),
    );
    checks.push(
      ...cursorChecks,
      await outboxCheck(store, config),
      await quarantineCheck(store),
      await conflictsCheck(store),
    );
    return checks;
  } finally {
    await store.close();
  }
}

/**
 * Whether Postgres answers a query within the timeout, and how: directly, or through
 * a pooler or proxy. The signal is the port: the server's own (inet_server_port())
 * differs from the one in DATABASE_URL when something listens in between, as PgBouncer
 * (6432) and the pooled endpoints of managed Postgres do. Over a Unix socket there is
 * no port to compare, and a proxy that keeps the port looks direct.
 */
async function reach(url: string, timeoutMs: number): Promise<{ error: string } | { route: string }> {
  const client = new pg.Client({
    connectionString: url,
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs,
    application_name: 'feedsync-doctor',
  });
  // A failure after connect arrives as an event; without a listener it would crash the process.
  client.on('error', () => {});
  try {
    await client.connect();
    const server = await serverPort(client);
    const configured = URL.canParse(url) ? Number(new URL(url).port || 5432) : server;
    if (server === null || server === configured) return { route: server === null ? '' : ', directly' };
    return {
      route:
        ` through a pooler or proxy (port ${configured} here, the server's own ${server}): supported, ` +
        'feedsync keeps no state in a Postgres session (PgBouncer in transaction mode included)',
    };
  } catch (err) {
    const e = err as { code?: string; message?: string };
    return { error: e.message || e.code || 'unknown error' };
  } finally {
    await client.end().catch(() => {});
  }
}

async function schemaCheck(store: Store): Promise<Check> {
  const state = await schemaState(store);
  if (state.current !== null && state.current > state.latest) {
    return check(
      'schema',
      'fail',
      `schema "${store.schema}" has migration ${state.current}, newer than this build's latest (${state.latest})`,
      'run the feedsync version that migrated it (or newer); an older build may misread the tables',
    );
  }
  if (state.pending.length > 0) {
    return check(
      'schema',
      'fail',
      state.current === null
        ? `schema "${store.schema}" has no feedsync tables yet (pending: ${state.pending.join(', ')})`
        : `schema "${store.schema}" is at ${state.current}; pending: ${state.pending.join(', ')}`,
      'run "feedsync migrate" (or start the worker with "sync --migrate")',
    );
  }
  return check('schema', 'ok', `schema "${store.schema}" is at ${state.latest}, the latest of this build`);
}

async function cursorCheck(
  store: Store,
  { config, suffix }: SourceUnderCheck,
  unknownId: ((id: string) => Promise<string | null>) | undefined,
): Promise<Check> {
  const name = `cursor${suffix}`;
  const source = config.feed.source;
  // A source of FEED_SOURCES_FILE has its types there (or FEED_TYPES when its entry has none).
  const typesFrom = suffix === '' ? 'FEED_TYPES' : `the types of source "${source}"`;
  const row = await getCursor(store, source);
  const wanted = config.feed.types ? [...config.feed.types].sort().join(',') : 'all types';
  if (!row) {
    return check(name, 'ok', `source "${source}" has no cursor yet: the first sync reads from the start`);
  }
  const stored = row.types ? [...row.types].sort().join(',') : 'all types';
  if (stored !== wanted) {
    return check(
      name,
      'fail',
      `the cursor of source "${source}" was built with ${stored}, but ${typesFrom} is ${wanted}: sync refuses to run`,
      `set ${typesFrom} back (${stored === 'all types' ? 'unset' : stored}), or "feedsync cursor reset --source ${shellQuote(source)}" ` +
        `(events are re-read and de-duplicated), or use another ${suffix === '' ? 'FEED_SOURCE' : 'source name'}`,
    );
  }
  const unknown = row.afterId !== null && unknownId ? await unknownId(row.afterId) : null;
  if (unknown !== null) {
    return check(
      name,
      'fail',
      `the cursor of source "${source}" is after ${row.afterId}, an id the feed does not know (${unknown}): every sync fails`,
      "first check FEED_API_KEY and FEED_BASE_URL: another account's key, or a simulator restarted since, is " +
        "another feed (put the source's own key back, or give it a FEED_SOURCE of its own); only for the same " +
        `feed, move the cursor to an id it knows: "feedsync cursor set <event-id> --source ${shellQuote(source)}", ` +
        `or start over: "feedsync cursor reset --source ${shellQuote(source)}" (events are re-read and de-duplicated)`,
    );
  }
  return check(
    name,
    'ok',
    `source "${source}": after ${row.afterId ?? '(start)'}, ${row.types ? `types ${stored}` : stored}, ` +
      `last success ${row.lastSuccessAt?.toISOString() ?? 'never'}`,
  );
}

async function outboxCheck(store: Store, config: Config): Promise<Check> {
  const { backlog, oldestUnpublished: oldest, publishedKept } = await outboxSummary(store);
  const retention = `${publishedKept} published rows kept ${config.queues.outboxRetentionHours} h for "feedsync requeue"`;
  if (backlog > 0 && oldest && Date.now() - oldest.getTime() > STALE_OUTBOX_MS) {
    return check(
      'outbox',
      'warn',
      `${backlog} rows wait for BullMQ, the oldest since ${oldest.toISOString()}; ${retention}`,
      'the events are stored, but their jobs are not in Redis: check Redis, then run "feedsync sync --once" to drain',
    );
  }
  return check('outbox', 'ok', `backlog ${backlog}; ${retention}`);
}

async function quarantineCheck(store: Store): Promise<Check> {
  const table = `${quoteSchema(store.schema)}.quarantine`;
  const n = await quarantined(store);
  if (n === 0) return check('quarantine', 'ok', 'no quarantined items');
  return check(
    'quarantine',
    'warn',
    `${n} item${n === 1 ? '' : 's'} (feed items or webhook bodies) could not be stored as events and wait in ${table}`,
    `look at them (SELECT id, source, reason, received_at, raw FROM ${table}), handle them, then delete the rows`,
  );
}
