import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { redactUrl } from '../logger.js';
import type { PgQueueSettings } from './pg-queues.js';
import { toQueueError } from './pg-queues.js';

/** What BullMQ's Postgres backend needs of its connection, said once wherever it is refused. */
export const PG_QUEUE_NEEDS =
  'QUEUE_DATABASE_URL must reach Postgres directly or through a session pooler: BullMQ sets search_path at start-up and its Workers LISTEN; a transaction pooler (PgBouncer pool_mode=transaction) serves DATABASE_URL only';

/** What the probe found wrong: the server out of reach, or a connection BullMQ cannot use (a transaction pooler). */
export type QueueConnectionProblem =
  | { readonly kind: 'unreachable'; readonly message: string }
  | { readonly kind: 'unfit'; readonly message: string };

/**
 * Tries the queues' connection as BullMQ's Postgres backend uses it: a start-up
 * `search_path` that the session keeps, and a NOTIFY from another session delivered to
 * a LISTEN. A transaction pooler fails one or the other (PgBouncer refuses `options`, or
 * drops it with `ignore_startup_parameters`; a LISTEN does not outlive its transaction
 * there). Null when the connection is fit. Writes nothing but one NOTIFY on a channel of
 * its own; `doctor` and a consumer's run() both ask it.
 */
export async function probeQueueConnection(
  queues: PgQueueSettings,
  timeoutMs: number,
  applicationName: string,
): Promise<QueueConnectionProblem | null> {
  const where = redactUrl(queues.url);
  const open = async (startup: boolean): Promise<pg.Client> => {
    const client = new pg.Client({
      connectionString: queues.url,
      connectionTimeoutMillis: timeoutMs,
      query_timeout: timeoutMs,
      application_name: applicationName,
      ...(startup ? { options: `-c search_path=${queues.schema}` } : {}),
    });
    client.on('error', () => {});
    clients.push(client);
    await client.connect();
    return client;
  };
  const clients: pg.Client[] = [];
  try {
    let listener: pg.Client;
    try {
      listener = await open(true);
    } catch (err) {
      const message = toQueueError(err).message;
      // PgBouncer refuses the start-up parameter it cannot pass on.
      if (/startup parameter/i.test(message)) {
        return { kind: 'unfit', message: `${where} refuses a start-up search_path (${message})` };
      }
      return { kind: 'unreachable', message: `cannot reach the queues' Postgres at ${where} (${message})` };
    }
    const path = await listener.query<{ search_path: string }>('SHOW search_path');
    if (path.rows[0]?.search_path.replaceAll('"', '') !== queues.schema) {
      return {
        kind: 'unfit',
        message: `${where} does not keep a start-up search_path (a transaction pooler that drops \`options\`?)`,
      };
    }
    const channel = `feedsync_probe_${randomBytes(6).toString('hex')}`;
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
    await notifier.query(`NOTIFY ${channel}`);
    if (!(await heard)) {
      return {
        kind: 'unfit',
        message: `${where}: a NOTIFY did not reach a LISTEN within ${timeoutMs} ms (a transaction pooler?)`,
      };
    }
    return null;
  } catch (err) {
    return { kind: 'unreachable', message: `${where}: ${toQueueError(err).message}` };
  } finally {
    await Promise.allSettled(clients.map((c) => c.end()));
  }
}
