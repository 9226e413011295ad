import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConsumer } from '../../src/consumer/index.js';
import { createLogger } from '../../src/logger.js';
import { migrateQueues } from '../../src/queue/pg-queues.js';
import { type PgBouncer, startPgBouncer } from '../faults/support/pgbouncer.js';
import { captureLogger } from '../support/logs.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import { waitFor } from '../support/processes.js';

// A consumer on Postgres queues behind a transaction pooler: BullMQ's Workers lose their
// start-up search_path there and their LISTEN hears nothing, so they would log an error
// for every try and consume nothing. run() refuses such a connection at once, naming the
// pooler, as `doctor` does. A real PgBouncer in transaction mode, both ways it treats
// the start-up `options`: refused, or dropped without a word.

const app = uniqueSchema('consumer_pooler');
const queues = uniqueSchema('consumer_pooler_q');
const pool = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 4 });
const target = new URL(TEST_DATABASE_URL);
const database = {
  host: target.hostname,
  port: Number(target.port || 5432),
  database: target.pathname.slice(1),
};
let refusing: PgBouncer;
let dropping: PgBouncer;

beforeAll(async () => {
  await migrateQueues({ url: TEST_DATABASE_URL, schema: queues }, 10_000);
  [refusing, dropping] = await Promise.all([
    startPgBouncer(database),
    startPgBouncer(database, { ignoreStartupParameters: 'options' }),
  ]);
});
afterAll(async () => {
  await refusing?.stop();
  await dropping?.stop();
  await pool.end();
  await dropSchema(app);
  await dropSchema(queues);
});

function consumerBehind(bouncer: PgBouncer) {
  return createConsumer({
    name: 'pooled',
    pool,
    schema: app,
    handlers: {},
    logger: createLogger({ level: 'silent' }),
    connectTimeoutMs: 3_000,
    env: { QUEUE_BACKEND: 'postgres', QUEUE_DATABASE_URL: bouncer.url, QUEUE_PREFIX: queues },
  });
}

describe('a consumer whose queues go through a transaction pooler', () => {
  it('run() refuses a pooler that drops the start-up search_path, naming it, and consumes nothing', async () => {
    const consumer = consumerBehind(dropping);
    await consumer.migrate();
    const error = await consumer.run().then(
      () => null,
      (err: unknown) => err,
    );
    expect(error).toMatchObject({
      code: 'QUEUE_POOLER',
      exitCode: 2,
      message: expect.stringMatching(
        /^QUEUE_DATABASE_URL: .* does not keep a start-up search_path .* a transaction pooler \(PgBouncer pool_mode=transaction\)/,
      ),
    });
    await consumer.close();
  }, 30_000);

  it('run() refuses a pooler that refuses the start-up options, naming it', async () => {
    const consumer = consumerBehind(refusing);
    await consumer.migrate();
    await expect(consumer.run()).rejects.toMatchObject({
      code: 'QUEUE_POOLER',
      message: expect.stringMatching(
        /^QUEUE_DATABASE_URL: .* refuses a start-up search_path .*transaction pooler/,
      ),
    });
    await consumer.close();
  }, 30_000);
});

describe('a Worker that errors on every try', () => {
  it('logs a line per 10 s at most, and backs off: tens of errors in 10 s, not thousands; close() still ends it', async () => {
    const own = uniqueSchema('consumer_errs_q');
    await migrateQueues({ url: TEST_DATABASE_URL, schema: own }, 10_000);
    const { logger, text } = captureLogger({ level: 'info' });
    const consumer = createConsumer({
      name: 'erring',
      pool,
      schema: app,
      handlers: {},
      logger,
      env: { QUEUE_BACKEND: 'postgres', QUEUE_DATABASE_URL: TEST_DATABASE_URL, QUEUE_PREFIX: own },
    });
    await consumer.migrate();
    const running = consumer.run();
    const gone = `${own}_gone`;
    try {
      await waitFor(() => text().includes('"msg":"consuming"'), { what: 'the consumer started' });
      // Every statement of the Workers now fails: their functions are no longer on their search_path.
      await pool.query(`ALTER SCHEMA "${own}" RENAME TO "${gone}"`);
      // The second line of a queue comes 10 s after its first, with the errors left out between.
      await waitFor(() => text().includes('"moreErrors"'), {
        timeoutMs: 20_000,
        what: 'a second worker error line',
      });
    } finally {
      await pool.query(`ALTER SCHEMA "${gone}" RENAME TO "${own}"`).catch(() => undefined);
      await consumer.close();
      await running;
      await dropSchema(own);
    }
    const lines = text()
      .split('\n')
      .filter((l) => l.includes('"msg":"worker error"'));
    // Two queues: a line each at first, the next ones 10 s later.
    expect(lines.length).toBeGreaterThanOrEqual(3);
    expect(lines.length).toBeLessThanOrEqual(4);
    // Paused 1, 2, 4, 8 s after each burst of 5: a few tens in 10 s (BullMQ alone tries again at once).
    const left = lines.map((l) => (JSON.parse(l) as { moreErrors?: number }).moreErrors ?? 0);
    expect(Math.max(...left)).toBeLessThan(100);
  }, 60_000);
});
