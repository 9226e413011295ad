import pg from 'pg';
import type { Config, QueueBackend } from '../config/config.js';
import { hostOf } from '../config/connection-url.js';

/** The demo's choice of database and queues, and the reason it gives on its first line. */
export interface DemoServers {
  /** The Postgres to use; null: none answers, so the demo starts one of its own. */
  readonly databaseUrl: string | null;
  readonly queueBackend: QueueBackend;
  /** Why, in words for the first line. */
  readonly why: string;
}

/** How long the default address is given to answer before the demo starts its own Postgres. */
const PROBE_TIMEOUT_MS = 2_000;

/**
 * Chooses the demo's servers: the Postgres DATABASE_URL names when it is set; else the
 * local one when it answers (as every other command would use); else one of the
 * demo's own. The queues go where the configuration says (QUEUE_BACKEND) on a Postgres
 * that is there anyway; in the demo's own Postgres they go there too, so that nothing
 * but Node is needed.
 */
export async function chooseDemoServers(
  config: Pick<Config, 'database' | 'redis' | 'queues' | 'given'>,
  answers: (url: string) => Promise<boolean> = postgresAnswers,
): Promise<DemoServers> {
  const configured = config.queues.backend;
  const queues =
    configured === 'postgres'
      ? `the queues in Postgres at ${hostOf(config.queues.databaseUrl)} (QUEUE_BACKEND=postgres)`
      : `the queues in the Redis at ${hostOf(config.redis.url)}`;
  const url = config.database.url;
  if (config.given.includes('DATABASE_URL')) {
    return { databaseUrl: url, queueBackend: configured, why: `DATABASE_URL names it; ${queues}` };
  }
  if (await answers(url)) {
    return {
      databaseUrl: url,
      queueBackend: configured,
      why: `it answers at the default address; ${queues}`,
    };
  }
  return {
    databaseUrl: null,
    queueBackend: 'postgres',
    why: `none answers at ${hostOf(url)} and DATABASE_URL is unset; the queues in it too (QUEUE_BACKEND=postgres: no Redis needed)`,
  };
}

/** Errors of a connection that found nothing listening, or nothing answering in time. */
const NOTHING_THERE = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'ETIMEDOUT']);

/**
 * Whether a Postgres answers at `url` within PROBE_TIMEOUT_MS. One that answers and
 * refuses the login answers: the demo then fails on it as any command would, rather
 * than hide a wrong password behind a Postgres of its own.
 */
export async function postgresAnswers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: PROBE_TIMEOUT_MS });
  // A server that drops the connection after the probe must not crash the process.
  client.on('error', () => {});
  try {
    await client.connect();
    return true;
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    return !(NOTHING_THERE.has(String(code)) || /timeout/i.test((err as Error).message));
  } finally {
    await client.end().catch(() => {});
  }
}
