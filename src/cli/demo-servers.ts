import pg from 'pg';
import { queueStoreFor } from '../compose/queue-store.js';
import type { Config } from '../config/config-type.js';
import { hostOf } from '../config/connection-url.js';

/** The demo's choice of database and queues, and the reason it gives on its first line. */
export interface DemoServers {
  /** The Postgres to use; null: none answers, so the demo starts one of its own. */
  readonly databaseUrl: string | null;
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
  answers: (url: string) => Promise<Answer> = postgresAnswers,
): Promise<DemoServers> {
  const queues = queueStoreFor(config).located;
  const url = config.database.url;
  if (config.given.includes('DATABASE_URL')) {
    return { databaseUrl: url, why: `DATABASE_URL names it; ${queues}` };
  }
  const answer = await answers(url);
  if (answer === 'postgres') {
    return { databaseUrl: url, why: `it answers at the default address; ${queues}` };
  }
  return {
    databaseUrl: null,
    why:
      `${answer === 'nothing' ? 'none answers' : `something that is not Postgres answers (${answer.other})`} at ${hostOf(url)} ` +
      'and DATABASE_URL is unset; the queues in it too (QUEUE_BACKEND=postgres: no Redis needed)',
  };
}

/** What answered at an address: a Postgres (one that refuses the login too), nothing, or something else, in its words. */
export type Answer = 'postgres' | 'nothing' | { other: string };

/** Errors of a connection that found nothing listening, or nothing answering in time. */
const NOTHING_THERE = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'ETIMEDOUT']);

/**
 * What answers at `url` within PROBE_TIMEOUT_MS. A Postgres that answers and refuses the
 * login answers (its refusal has a SQLSTATE): the demo then fails on it as any command
 * would, rather than hide a wrong password behind a Postgres of its own. Anything else
 * that takes the connection (another server on the port) is named, not blamed on Redis.
 */
export async function postgresAnswers(url: string): Promise<Answer> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: PROBE_TIMEOUT_MS });
  // A server that drops the connection after the probe must not crash the process.
  client.on('error', () => {});
  try {
    await client.connect();
    return 'postgres';
  } catch (err) {
    const code = String((err as { code?: unknown }).code);
    const message = (err as Error).message;
    if (NOTHING_THERE.has(code) || /timeout/i.test(message)) return 'nothing';
    return /^[0-9A-Z]{5}$/.test(code) ? 'postgres' : { other: message };
  } finally {
    await client.end().catch(() => {});
  }
}
