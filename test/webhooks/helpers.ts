import { Pool } from 'undici';
import type { Config } from '../../src/config/config-type.js';
import type { Logger } from '../../src/logger.js';
import { createStore, type Store } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrate.js';
import { signWebhookPayload } from '../../src/webhooks/signature.js';
import { startWebhookService, type WebhookService } from '../../src/webhooks/webhook-service.js';
import { dropSchema, TEST_DATABASE_URL } from '../support/postgres.js';
import { dropQueues, migrateTestQueues, testQueue } from '../support/queues.js';

/** Secrets of the test receivers: two, as during a rotation. */
export const SECRET_OLD = 'whsec_test_old_0123456789abcdef';
export const SECRET_NEW = 'whsec_test_new_fedcba9876543210';

export { captureLogger } from '../support/logs.js';

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  // biome-ignore lint/suspicious/noExplicitAny: tests read whatever JSON came back
  body: any;
}

/** One request over a pool; the body is parsed as JSON when it is JSON. */
export async function send(
  pool: Pool,
  opts: { method?: string; path?: string; body?: string | Buffer; headers?: Record<string, string> },
): Promise<Answer> {
  const res = await pool.request({
    method: (opts.method ?? 'POST') as 'POST',
    path: opts.path ?? '/webhooks',
    headers: { 'content-type': 'application/json', ...opts.headers },
    ...(opts.body === undefined ? {} : { body: opts.body }),
  });
  const text = await res.body.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Left as text.
  }
  return { status: res.statusCode, headers: res.headers, body };
}

/** Posts a body signed with `secret` at `t` (default now). */
export function deliver(
  pool: Pool,
  body: string | Buffer,
  secret = SECRET_NEW,
  t = Math.floor(Date.now() / 1000),
): Promise<Answer> {
  return send(pool, { body, headers: { 'service-signature': signWebhookPayload(body, secret, t) } });
}

/** A keep-alive pool to a receiver's origin, at most `connections` sockets at once. */
export function poolFor(url: string, connections = 16): Pool {
  return new Pool(new URL(url).origin, { connections, pipelining: 1 });
}

let counter = 0;

/** A valid email event envelope with a fresh id. */
export function emailEvent(
  type = 'email.delivered',
  over: Record<string, unknown> = {},
): { type: string; id: string; created_at: string; data: Record<string, unknown> } {
  counter += 1;
  return {
    type,
    id: `evt_wh_${process.pid}_${counter}`,
    created_at: new Date(Date.UTC(2025, 0, 1, 0, 0, counter % 60)).toISOString(),
    data: { email_id: `em_wh_${counter}`, to: ['someone@example.com'] },
    ...over,
  };
}

/** Rows of a table in a schema. */
export async function count(store: Store, table: string, where = 'true'): Promise<number> {
  const { rows } = await store.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${store.schema}".${table} WHERE ${where}`,
  );
  return rows[0]!.n;
}

/** Every job id of a queue, in any state. */
export async function jobIds(prefix: string, queue: string): Promise<string[]> {
  const q = testQueue(queue, prefix);
  try {
    const jobs = await q.getJobs(['waiting', 'active', 'completed', 'failed', 'delayed', 'prioritized']);
    return jobs.map((j) => j.id!);
  } finally {
    await q.close();
  }
}

/** A receiver of one test file's own: a migrated schema, the service, a client pool. */
export interface TestReceiver {
  store: Store;
  service: WebhookService;
  pool: Pool;
  /** Closes everything and drops the schema and the queue prefix. */
  close(): Promise<void>;
}

export async function startTestReceiver(
  config: Config,
  logger: Logger,
  opts: {
    connections: number;
    schema: string;
    prefix: string;
    relaySweepMs?: number;
    retentionIntervalMs?: number;
  },
): Promise<TestReceiver> {
  const store = createStore({ url: TEST_DATABASE_URL, schema: opts.schema });
  await migrate(store);
  await migrateTestQueues(opts.prefix);
  const service = await startWebhookService(config, {
    logger,
    port: 0,
    host: '127.0.0.1',
    ...(opts.relaySweepMs === undefined ? {} : { relaySweepMs: opts.relaySweepMs }),
    ...(opts.retentionIntervalMs ? { retentionIntervalMs: opts.retentionIntervalMs } : {}),
  });
  const pool = poolFor(service.server.url, opts.connections);
  return {
    store,
    service,
    pool,
    async close() {
      await pool.close();
      await service.close();
      await store.close();
      await dropSchema(opts.schema);
      await dropQueues(opts.prefix);
    },
  };
}
