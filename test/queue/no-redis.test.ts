import { createServer, type Server } from 'node:net';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { createConsumer } from '../../src/consumer/index.js';
import { migrateQueues } from '../../src/queue/pg-queues.js';
import { createSync } from '../../src/sync/sync.js';
import { signWebhookPayload } from '../../src/webhooks/signature.js';
import { testEnv } from '../support/config.js';
import { captureLogger } from '../support/logs.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import { CLI, freePort, killChildren, runCli, spawnNode, waitFor } from '../support/processes.js';
import { useSimulator } from '../support/simulator.js';

// QUEUE_BACKEND=postgres: no command, the receiver, the consumer, the demo nor an
// embedding opens a Redis connection, and none needs REDIS_* (set at a port where a
// listener counts connections, or unset while a preload tells of any to 6379).

const SECRET = 'whsec_noredis_0123456789';
const GUARD = fileURLToPath(new URL('../children/no-redis-guard.mjs', import.meta.url));
const sim = useSimulator({ backlog: 120 });
let listener: Server;
let port = 0;
let connections = 0;
const made: string[] = [];

beforeAll(async () => {
  port = await freePort();
  listener = createServer((socket) => {
    connections += 1;
    socket.destroy();
  });
  await new Promise<void>((resolve) => listener.listen(port, '127.0.0.1', resolve));
});
afterAll(async () => {
  await killChildren();
  await new Promise((resolve) => listener.close(resolve));
  for (const schema of made) await dropSchema(schema);
});

/** A schema and a queues' schema of one case's own, and the environment on them. */
function sandbox(label: string, redis: 'listener' | 'unset') {
  const schema = uniqueSchema(`noredis_${label}`);
  const prefix = uniqueSchema(`noredis_q_${label}`);
  made.push(schema, prefix);
  const env: Record<string, string> = {
    ...testEnv(
      { schema, prefix, baseUrl: sim().baseUrl },
      { QUEUE_BACKEND: 'postgres', QUEUE_DATABASE_URL: TEST_DATABASE_URL, WEBHOOK_SECRET: SECRET },
    ),
    PATH: process.env.PATH ?? '',
  };
  if (redis === 'listener') env.REDIS_URL = `redis://127.0.0.1:${port}`;
  else {
    delete env.REDIS_URL;
    env.NODE_OPTIONS = `--import=${GUARD}`;
  }
  return { schema, prefix, env };
}

describe.each(['listener', 'unset'] as const)('QUEUE_BACKEND=postgres, REDIS_URL %s', (redis) => {
  it('migrate, sync --once, status, requeue --since and --failed, doctor, serve-webhooks and demo open no Redis', async () => {
    const box = sandbox(redis, redis);
    const outputs: string[] = [];
    const cli = async (args: string[], env = box.env) => {
      const res = await runCli(args, env, 60_000);
      outputs.push(res.stdout, res.stderr);
      expect(res.code, `feedsync ${args.join(' ')}\n${res.stderr}`).toBe(0);
      return res;
    };
    const migrated = await cli(['migrate']);
    expect(migrated.stdout).toContain(`queues' schema ${box.prefix}`);
    await cli(['sync', '--once']);
    const status = JSON.parse((await cli(['status', '--json'])).stdout) as {
      queues: Record<string, Record<string, number> | null>;
    };
    expect(status.queues['email-events']?.waiting).toBeGreaterThan(0);
    const since = new Date(Date.now() - 3_600_000).toISOString();
    await cli(['requeue', '--since', since, '--json']);
    await cli(['requeue', '--failed', '--json']);
    const doctor = await runCli(['doctor'], box.env, 60_000);
    outputs.push(doctor.stdout, doctor.stderr);
    expect(doctor.stdout).toMatch(/ok\s+queues-postgres/);
    expect(doctor.stdout).toMatch(/ok\s+queues-schema/);

    // The receiver: ready (/readyz asks the queues' Postgres), and a delivery taken and queued.
    const webhookPort = await freePort();
    const receiver = spawnNode([CLI, 'serve-webhooks'], {
      ...box.env,
      WEBHOOK_PORT: String(webhookPort),
      METRICS_PORT: '0',
    });
    await waitFor(
      async () =>
        (await request(`http://127.0.0.1:${webhookPort}/readyz`).then(
          (r) => r.body.dump().then(() => r.statusCode),
          () => 0,
        )) === 200,
      { timeoutMs: 30_000, what: 'serve-webhooks to be ready' },
    );
    const body = JSON.stringify({
      id: `wh_${redis}`,
      type: 'email.delivered',
      created_at: new Date().toISOString(),
      data: { email_id: `em_wh_${redis}`, to: ['a@example.com'] },
    });
    const delivered = await request(`http://127.0.0.1:${webhookPort}/webhooks`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'service-signature': signWebhookPayload(body, SECRET, Math.floor(Date.now() / 1000)),
      },
      body,
    });
    await delivered.body.dump();
    expect(delivered.statusCode).toBeLessThan(300);
    receiver.signal('SIGTERM');
    const ended = await receiver.waitExit(20_000);
    outputs.push(ended.stdout, ended.stderr);

    const demoSchema = uniqueSchema(`noredis_demo_${redis}`);
    const demoQueues = uniqueSchema(`noredis_demoq_${redis}`);
    made.push(demoSchema, demoQueues);
    const demo = await cli(['demo'], { ...box.env, DATABASE_SCHEMA: demoSchema, QUEUE_PREFIX: demoQueues });
    expect(demo.stdout).toContain('no mail was sent again');
    expect(demo.stdout).toContain('no Redis');

    expect(outputs.join('\n')).not.toContain('REDIS CONNECTION OPENED');
    expect(connections).toBe(0);
  });
});

it('an embedding process (createSync) and a consumer on Postgres queues open no Redis', async () => {
  const box = sandbox('embedded', 'listener');
  await migrateQueues({ url: TEST_DATABASE_URL, schema: box.prefix }, 10_000);
  const config = loadConfig(box.env);
  const { logger } = captureLogger({ level: 'warn' });
  const sync = createSync(config, { logger, autoMigrate: true });
  try {
    expect(await sync.runOnce()).toMatchObject({ status: 'caught-up', drained: true });
  } finally {
    await sync.close();
  }
  const pool = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 6 });
  let handled = 0;
  const consumer = createConsumer({
    name: 'no-redis',
    pool,
    schema: box.schema,
    env: box.env,
    logger,
    handlers: {
      'email.sent': async () => {
        handled += 1;
      },
    },
  });
  try {
    await consumer.migrate();
    const running = consumer.run();
    await waitFor(() => handled > 0, { timeoutMs: 20_000, what: 'the consumer to take a job' });
    await consumer.close();
    await running;
  } finally {
    await consumer.close();
    await pool.end();
  }
  expect(connections).toBe(0);
});
