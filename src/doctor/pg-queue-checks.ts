import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { pgQueuesOf } from '../compose/parts.js';
import type { Config } from '../config/config.js';
import { redactUrl } from '../logger.js';
import { assertQueueSchema, queueSchemaVersion, toQueueError } from '../queue/pg-queues.js';
import { queuesCheck } from './redis-checks.js';
import { type Check, check } from './report.js';

/** What BullMQ's Postgres backend needs of its connection, said once for every fix. */
const NEEDS =
  'QUEUE_DATABASE_URL must reach Postgres directly or through a session pooler: BullMQ sets search_path at start-up and its Workers LISTEN; a transaction pooler (PgBouncer pool_mode=transaction) serves DATABASE_URL only';

/**
 * With QUEUE_BACKEND=postgres: the queues' Postgres answers, its connection keeps a
 * start-up search_path and delivers a NOTIFY to a LISTEN (not a transaction pooler),
 * the queues' schema is migrated to this BullMQ's version, and the queues' counts.
 * Writes nothing but one NOTIFY on a channel of its own.
 */
export async function pgQueueChecks(config: Config, timeoutMs: number): Promise<Check[]> {
  const queues = pgQueuesOf(config);
  const where = redactUrl(queues.url);
  const connection = await connectionCheck(queues, where, timeoutMs);
  if (connection.status === 'fail') {
    return [
      connection,
      check('queues-schema', 'skip', 'not checked: see queues-postgres'),
      check('queues', 'skip', 'not checked: see queues-postgres'),
    ];
  }
  return [
    connection,
    await schemaCheck(queues, timeoutMs),
    await queuesCheck(config, timeoutMs, 'queues-postgres'),
  ];
}

async function connectionCheck(
  queues: { url: string; schema: string },
  where: string,
  timeoutMs: number,
): Promise<Check> {
  const open = async (startup: boolean): Promise<pg.Client> => {
    const client = new pg.Client({
      connectionString: queues.url,
      connectionTimeoutMillis: timeoutMs,
      query_timeout: timeoutMs,
      application_name: 'feedsync-doctor',
      ...(startup ? { options: `-c search_path=${queues.schema}` } : {}),
    });
    client.on('error', () => {});
    await client.connect();
    return client;
  };
  const clients: pg.Client[] = [];
  try {
    let listener: pg.Client;
    try {
      listener = await open(true);
      clients.push(listener);
    } catch (err) {
      const message = toQueueError(err).message;
      // PgBouncer refuses the start-up parameter it cannot pass on.
      if (/startup parameter/i.test(message)) {
        return check(
          'queues-postgres',
          'fail',
          `${where} refuses a start-up search_path (${message})`,
          NEEDS,
        );
      }
      return check(
        'queues-postgres',
        'fail',
        `cannot reach the queues' Postgres at ${where} (${message})`,
        'check QUEUE_DATABASE_URL (DATABASE_URL when unset: host, port, database, user, password) and that ' +
          `the server runs and accepts this client; then: ${NEEDS}`,
      );
    }
    const path = await listener.query<{ search_path: string }>('SHOW search_path');
    if (path.rows[0]?.search_path.replaceAll('"', '') !== queues.schema) {
      return check('queues-postgres', 'fail', `${where} does not keep a start-up search_path`, NEEDS);
    }
    const channel = `feedsync_doctor_${randomBytes(6).toString('hex')}`;
    const heard = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      listener.on('notification', (n) => {
        if (n.channel !== channel) return;
        clearTimeout(timer);
        resolve(true);
      });
    });
    await listener.query(`LISTEN ${channel}`);
    const notifier = await open(false);
    clients.push(notifier);
    await notifier.query(`NOTIFY ${channel}`);
    if (!(await heard)) {
      return check(
        'queues-postgres',
        'fail',
        `${where}: a NOTIFY did not reach a LISTEN within ${timeoutMs} ms (a transaction pooler?)`,
        NEEDS,
      );
    }
    return check('queues-postgres', 'ok', `${where}: start-up search_path kept, LISTEN/NOTIFY delivered`);
  } catch (err) {
    return check('queues-postgres', 'fail', `${where}: ${toQueueError(err).message}`, NEEDS);
  } finally {
    await Promise.allSettled(clients.map((c) => c.end()));
  }
}

async function schemaCheck(queues: { url: string; schema: string }, timeoutMs: number): Promise<Check> {
  try {
    const { version, latest } = await queueSchemaVersion(queues, timeoutMs);
    if (version === null) {
      return check(
        'queues-schema',
        'fail',
        `schema "${queues.schema}" holds no BullMQ migrations`,
        "run `feedsync migrate` (it migrates the queues' schema too)",
      );
    }
    await assertQueueSchema(queues, timeoutMs);
    const state =
      version < latest ? `, this BullMQ brings ${latest}: \`feedsync migrate\` applies the rest` : '';
    return check(
      'queues-schema',
      version < latest ? 'warn' : 'ok',
      `schema "${queues.schema}" at BullMQ migration ${version}${state}`,
      ...(version < latest ? ['run `feedsync migrate`'] : []),
    );
  } catch (err) {
    return check('queues-schema', 'fail', (err as Error).message, 'run `feedsync migrate`');
  }
}
