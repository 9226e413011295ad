import { createServer, type Socket } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pruneInbox } from '../../src/consumer/inbox.js';
import {
  type ConsumerOptions,
  createConsumer,
  type FeedsyncEvent,
  migrateInbox,
  withInbox,
} from '../../src/consumer/index.js';
import { startPruning } from '../../src/consumer/pruning.js';
import { jobIdFor, jobOptionsFor } from '../../src/queue/routes.js';
import { captureLogger } from '../support/logs.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import { freePort, waitFor } from '../support/processes.js';
import { dropQueues, queuePrefix, TEST_QUEUE_ENV, testQueue } from '../support/queues.js';
import { TEST_REDIS_URL } from '../support/redis.js';

const schema = uniqueSchema('consumer');
const prefix = await queuePrefix('consumer');
const pool = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 12 });
const env = { REDIS_URL: TEST_REDIS_URL, QUEUE_PREFIX: prefix, ...TEST_QUEUE_ENV };
const queues = { email: testQueue('email-events', prefix), contact: testQueue('contact-events', prefix) };
const options = jobOptionsFor({ jobAttempts: 3, jobBackoffMs: 10 });

beforeAll(async () => {
  await pool.query(`CREATE SCHEMA "${schema}"`);
  await pool.query(`CREATE TABLE "${schema}".effects (event_id text NOT NULL, note text)`);
});
afterAll(async () => {
  await queues.email.close();
  await queues.contact.close();
  await pool.end();
  await dropSchema(schema);
  await dropQueues(prefix);
});

function email(id: string, type: string, to: unknown = ['a.person@example.com']): FeedsyncEvent {
  return {
    source: 'default',
    id,
    type,
    created_at: '2026-01-01T00:00:00.000Z',
    data: { email_id: `em_${id}`, to },
  } as FeedsyncEvent;
}

async function add(event: { source: string; id: string; type: string }, queue = queues.email): Promise<void> {
  await queue.add(event.type, event, { ...options, jobId: jobIdFor(event.source, event.id) });
}

const effects = async (): Promise<Map<string, number>> => {
  const { rows } = await pool.query<{ event_id: string; n: number }>(
    `SELECT event_id, count(*)::int AS n FROM "${schema}".effects GROUP BY 1`,
  );
  return new Map(rows.map((r) => [r.event_id, r.n]));
};
const inboxRows = async (name: string): Promise<number> =>
  (
    await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "${schema}".feedsync_inbox WHERE consumer = $1`,
      [name],
    )
  ).rows[0]!.n;

describe('createConsumer', () => {
  it('migrate() from many replicas at once makes one inbox table', async () => {
    await Promise.all(
      Array.from({ length: 6 }, () =>
        createConsumer({ name: 'm', pool, handlers: {}, schema, env }).migrate(),
      ),
    );
    const { rows } = await pool.query(
      `SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND tablename = 'feedsync_inbox' ORDER BY 1`,
      [schema],
    );
    expect(rows.map((r) => r.indexname)).toEqual(['feedsync_inbox_pkey', 'feedsync_inbox_pruning']);
    // A schema that does not exist yet is made.
    const other = uniqueSchema('consumer_new');
    try {
      await Promise.all([migrateInbox(pool, other), migrateInbox(pool, other)]);
      expect((await pool.query(`SELECT FROM "${other}".feedsync_inbox`)).rowCount).toBe(0);
    } finally {
      await dropSchema(other);
    }
  });

  it('applies each event once: again, retried after a throw, and not at all without a handler', async () => {
    const { logger, text } = captureLogger({ level: 'info' });
    let throwsLeft = 2;
    const seen: string[] = [];
    const consumer = createConsumer({
      name: 'once',
      pool,
      schema,
      env,
      logger,
      handlers: {
        'email.bounced': async (event, db) => {
          seen.push(`${event.id} ${event.data.email_id} ${event.data.to.length}`);
          // A plain INSERT: a second effect of one event would show as a second row.
          await db.query(`INSERT INTO "${schema}".effects (event_id, note) VALUES ($1, 'bounced')`, [
            event.id,
          ]);
          if (event.id === 'e3' && throwsLeft-- > 0)
            throw new Error('no row for flaky.person@example.com yet');
        },
        'contact.unsubscribed': async (event, db) => {
          await db.query(`INSERT INTO "${schema}".effects (event_id, note) VALUES ($1, 'contact')`, [
            event.id,
          ]);
        },
      },
    });
    const running = consumer.run();
    try {
      await add(email('e1', 'email.bounced'));
      await add(email('e2', 'email.bounced', 'one.address@example.com'));
      await add(email('e3', 'email.bounced'));
      await add(email('e4', 'email.delivered'));
      await add(
        {
          source: 'default',
          id: 'c1',
          type: 'contact.unsubscribed',
          created_at: 'x',
          data: {},
        } as FeedsyncEvent,
        queues.contact,
      );
      await waitFor(async () => (await queues.email.getCompletedCount()) === 4, { what: 'four email jobs' });
      await waitFor(async () => (await queues.contact.getCompletedCount()) === 1, {
        what: 'the contact job',
      });
      expect(await effects()).toEqual(
        new Map([
          ['e1', 1],
          ['e2', 1],
          ['e3', 1],
          ['c1', 1],
        ]),
      );
      // e4 has no handler: completed, no inbox row.
      expect(await inboxRows('once')).toBe(4);
      expect(seen).toContain('e2 em_e2 1');

      // Every job again, as after Redis lost them or a requeue: no handler runs.
      await queues.email.clean(0, 100, 'completed');
      await queues.contact.clean(0, 100, 'completed');
      const before = seen.length;
      for (const id of ['e1', 'e2', 'e3']) await add(email(id, 'email.bounced'));
      await waitFor(async () => (await queues.email.getCompletedCount()) === 3, { what: 'the jobs again' });
      expect(seen.length).toBe(before);
      expect(await effects()).toEqual(
        new Map([
          ['e1', 1],
          ['e2', 1],
          ['e3', 1],
          ['c1', 1],
        ]),
      );

      // A job feedsync would not add fails at once, without retries and without an inbox row.
      await queues.email.add(
        'email.sent',
        { source: 'default', id: 'bad', type: 'email.sent', data: {} },
        {
          ...options,
          jobId: 'default/bad',
        },
      );
      await waitFor(async () => (await queues.email.getFailedCount()) === 1, { what: 'the bad job failed' });
      const failed = await queues.email.getJob('default/bad');
      expect(failed?.attemptsMade).toBe(1);
      expect(failed?.failedReason).toMatch(/created_at is not a string/);
    } finally {
      await consumer.close();
      await running;
    }
    expect(throwsLeft).toBe(-1);
    const log = text();
    expect(log).toContain('job failed');
    expect(log).toContain('[address]');
    expect(log).not.toContain('@example.com');
  });

  it('close() lets the job in hand commit before it resolves', async () => {
    let started!: () => void;
    const inHand = new Promise<void>((resolve) => {
      started = resolve;
    });
    // The handler holds its job until close() has been called.
    let release!: () => void;
    const closing = new Promise<void>((resolve) => {
      release = resolve;
    });
    const consumer = createConsumer({
      name: 'slow',
      pool,
      schema,
      env,
      logger: captureLogger().logger,
      handlers: {
        'email.failed': async (event, db) => {
          started();
          await closing;
          await db.query(`INSERT INTO "${schema}".effects (event_id, note) VALUES ($1, 'slow')`, [event.id]);
        },
      },
    });
    const running = consumer.run();
    await add(email('s1', 'email.failed'));
    await inHand;
    const closed = consumer.close();
    release();
    await closed;
    await running;
    expect((await effects()).get('s1')).toBe(1);
    expect(await inboxRows('slow')).toBe(1);
    expect((await queues.email.getJob('default/s1'))?.finishedOn).toBeGreaterThan(0);
  });

  it('withInbox runs fn once for one event, however many calls at once', async () => {
    let runs = 0;
    const event = { source: 'other', id: 'w1' };
    const results = await Promise.all(
      Array.from({ length: 8 }, () =>
        withInbox(
          pool,
          'own-worker',
          event,
          async (db) => {
            runs++;
            await db.query('SELECT pg_sleep(0.05)');
          },
          { schema },
        ),
      ),
    );
    expect(runs).toBe(1);
    expect(results.filter(Boolean)).toHaveLength(1);
    // A throw rolls back the row: the next call runs fn.
    await expect(
      withInbox(
        pool,
        'own-worker',
        { source: 'other', id: 'w2' },
        async () => {
          throw new Error('boom');
        },
        { schema },
      ),
    ).rejects.toThrow('boom');
    expect(
      await withInbox(pool, 'own-worker', { source: 'other', id: 'w2' }, async () => {}, { schema }),
    ).toBe(true);
  });

  it('withInbox records ids and names holding quotes and backslashes as they are', async () => {
    // The inbox row is sent with BEGIN as literals, not parameters: each must come back intact.
    const name = "o'brien\\worker";
    const event = { source: "sou'rce\\", id: "id'); DROP TABLE x; --\\'" };
    expect(await withInbox(pool, name, event, async () => {}, { schema })).toBe(true);
    expect(await withInbox(pool, name, event, async () => {}, { schema })).toBe(false);
    const { rows } = await pool.query(
      `SELECT source, event_id FROM "${schema}".feedsync_inbox WHERE consumer = $1`,
      [name],
    );
    expect(rows).toEqual([{ source: event.source, event_id: event.id }]);
  });

  it('prunes only rows older than the retention, of its own name', async () => {
    await pool.query(
      `INSERT INTO "${schema}".feedsync_inbox (consumer, source, event_id, processed_at)
       SELECT c, 'default', 'old' || i, now() - interval '9 days' FROM generate_series(1, 5) i, unnest(ARRAY['p', 'q']) c`,
    );
    expect(await pruneInbox(pool, { schema, name: 'p', hours: 168, batch: 3 })).toBe(3);
    expect(await pruneInbox(pool, { schema, name: 'p', hours: 168, batch: 3 })).toBe(2);
    expect(await pruneInbox(pool, { schema, name: 'p', hours: 168, batch: 3 })).toBe(0);
    expect(await inboxRows('q')).toBe(5);
  });

  it('run() refuses to start without its inbox table, saying to migrate', async () => {
    const bare = uniqueSchema('consumer_bare');
    await pool.query(`CREATE SCHEMA "${bare}"`);
    try {
      const consumer = createConsumer({ name: 'x', pool, handlers: {}, schema: bare, env });
      await expect(consumer.run()).rejects.toMatchObject({
        code: 'CONSUMER_NOT_MIGRATED',
        message: `the inbox table ${bare}.feedsync_inbox does not exist: call migrate() before run()`,
      });
      await consumer.close();
    } finally {
      await dropSchema(bare);
    }
  });

  it('reads the queue settings when created, with feedsync checks, and refuses bad options with a code', () => {
    expect(() => createConsumer({ name: 'x', pool, handlers: {}, env: { QUEUE_PREFIX: 'a:b' } })).toThrow(
      /^QUEUE_PREFIX: must be non-empty, without ":" or spaces$/,
    );
    expect(() => createConsumer({ name: '', pool, handlers: {}, env })).toThrow(
      expect.objectContaining({ code: 'CONSUMER_BAD_OPTION' }),
    );
    expect(() => createConsumer({ name: 'x', pool, handlers: {}, schema: 'Bad-Name', env })).toThrow(
      expect.objectContaining({ code: 'CONSUMER_BAD_OPTION' }),
    );
  });
});

describe('the numeric options, checked at createConsumer', () => {
  const make = (extra: Partial<ConsumerOptions>) => () =>
    createConsumer({ name: 'x', pool, handlers: {}, env, ...extra });

  it('refuses a stall setting out of its range, naming it', () => {
    const refused: [Partial<ConsumerOptions>, RegExp][] = [
      [
        { stalls: { stalledInterval: 2_147_483_648 } },
        /^stalls\.stalledInterval: must be a whole number of milliseconds from 100 to 2147483647; got 2147483648$/,
      ],
      [{ stalls: { lockDuration: 0 } }, /^stalls\.lockDuration: .* from 1000 to 2147483647; got 0$/],
      [{ stalls: { lockDuration: -1 } }, /^stalls\.lockDuration: .*; got -1$/],
      [{ stalls: { lockDuration: 1.5e3 + 0.5 } }, /^stalls\.lockDuration: /],
      [
        { stalls: { maxStalledCount: -1 } },
        /^stalls\.maxStalledCount: must be a whole number from 0 to 1000000; got -1$/,
      ],
      [{ stalls: { lockDurationMs: 1_000 } as never }, /^stalls\.lockDurationMs: is not a stall setting/],
      [{ stalls: 5 as never }, /^stalls: must be an object/],
    ];
    for (const [options, message] of refused) {
      expect(make(options)).toThrow(message);
      expect(make(options)).toThrow(expect.objectContaining({ code: 'CONSUMER_BAD_OPTION', exitCode: 2 }));
    }
    expect(make({ stalls: { lockDuration: 1_000, stalledInterval: 100, maxStalledCount: 0 } })).not.toThrow();
  });

  it('refuses every other number out of its range, naming the option', () => {
    const refused: [Partial<ConsumerOptions>, string][] = [
      [{ concurrency: 0 }, 'concurrency'],
      [{ concurrency: 1_001 }, 'concurrency'],
      [{ retentionHours: 1 }, 'retentionHours'],
      [{ retentionHours: 2_147_483_648 }, 'retentionHours'],
      [{ handlerTimeoutMs: 0 }, 'handlerTimeoutMs'],
      [{ lockTimeoutMs: 2_147_483_648 }, 'lockTimeoutMs'],
      [{ connectTimeoutMs: -1 }, 'connectTimeoutMs'],
      [{ closeTimeoutMs: Number.NaN }, 'closeTimeoutMs'],
    ];
    for (const [options, option] of refused) {
      expect(make(options)).toThrow(new RegExp(`^${option}: must be a whole number`));
    }
  });
});

describe('a fleet of replicas', () => {
  beforeAll(() => migrateInbox(pool, schema));

  /** A promise and the function that settles it. */
  function signal(): { promise: Promise<void>; fire: () => void } {
    let fire!: () => void;
    const promise = new Promise<void>((resolve) => {
      fire = resolve;
    });
    return { promise, fire };
  }

  it('a replica starting while another holds a job in its transaction stalls no replica', async () => {
    const holding = signal();
    const release = signal();
    const handled: string[] = [];
    const replica = () =>
      createConsumer({
        name: 'fleet',
        pool,
        schema,
        env,
        logger: captureLogger().logger,
        handlers: {
          'email.complained': async (event, db) => {
            await db.query(`INSERT INTO "${schema}".effects (event_id, note) VALUES ($1, 'fleet')`, [
              event.id,
            ]);
            if (event.id === 'hold') {
              holding.fire();
              // A handler holding its transaction (a slow HTTP call, a paused process).
              await release.promise;
            }
            handled.push(event.id);
          },
        },
      });
    const [a, c] = [replica(), replica()];
    const running = [a.run(), c.run()];
    const b = replica();
    try {
      await add(email('hold', 'email.complained'));
      await holding.promise;
      // A third replica starts, migrating first as replicas do, while the job is held.
      let migrated = false;
      const migrating = b.migrate().then(() => {
        migrated = true;
      });
      // Whatever its migrate() does with the inbox is under way: done, or waiting on a lock.
      await waitFor(
        async () =>
          migrated ||
          (
            await pool.query(
              `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1`,
              [`%"${schema}".feedsync_inbox%`],
            )
          ).rowCount! > 0,
        { what: 'migrate() under way' },
      );
      for (let i = 0; i < 10; i++) await add(email(`f${i}`, 'email.complained'));
      await waitFor(() => handled.filter((id) => id.startsWith('f')).length === 10, {
        what: 'the other replicas to handle ten jobs while one is held',
      });
      await migrating;
      running.push(b.run());
      await add(email('f10', 'email.complained'));
      await waitFor(() => handled.includes('f10'), { what: 'a job after the third replica started' });
      expect(handled).not.toContain('hold');
    } finally {
      release.fire();
      await Promise.all([a.close(), b.close(), c.close()]);
      await Promise.all(running);
    }
    expect(handled).toContain('hold');
  });

  it('a handler past handlerTimeoutMs is rolled back and its job retried', async () => {
    const { logger, text } = captureLogger({ level: 'info' });
    let attempts = 0;
    const consumer = createConsumer({
      name: 'deadline',
      pool,
      schema,
      env,
      logger,
      handlerTimeoutMs: 300,
      handlers: {
        'email.delivered': async (event, db) => {
          attempts++;
          await db.query(`INSERT INTO "${schema}".effects (event_id, note) VALUES ($1, 'deadline')`, [
            event.id,
          ]);
          // The first attempt hangs for ever, its transaction open.
          if (attempts === 1) await new Promise(() => {});
        },
      },
    });
    const running = consumer.run();
    try {
      await add(email('d1', 'email.delivered'));
      await waitFor(async () => (await queues.email.getJob('default/d1'))?.isCompleted(), {
        what: 'the job completed',
      });
      expect((await queues.email.getJob('default/d1'))?.attemptsMade).toBe(2);
    } finally {
      await consumer.close();
      await running;
    }
    // The hung attempt's write went with its transaction.
    expect((await effects()).get('d1')).toBe(1);
    expect(await inboxRows('deadline')).toBe(1);
    expect(text()).toContain('CONSUMER_HANDLER_TIMEOUT');
  });

  it('close() past closeTimeoutMs rolls a hung handler back and resolves', async () => {
    const started = signal();
    const consumer = createConsumer({
      name: 'hung',
      pool,
      schema,
      env,
      logger: captureLogger().logger,
      closeTimeoutMs: 200,
      handlerTimeoutMs: 600_000,
      handlers: {
        'email.failed': async (event, db) => {
          await db.query(`INSERT INTO "${schema}".effects (event_id, note) VALUES ($1, 'hung')`, [event.id]);
          started.fire();
          await new Promise(() => {});
        },
      },
    });
    const running = consumer.run();
    await add(email('h1', 'email.failed'));
    await started.promise;
    await consumer.close();
    await running;
    expect((await effects()).get('h1')).toBeUndefined();
    expect(await inboxRows('hung')).toBe(0);
  });
});

describe('migrate()', () => {
  it('gives up at once, saying so, when it has DDL to run and the table is locked', async () => {
    const other = uniqueSchema('consumer_locked');
    await migrateInbox(pool, other);
    await pool.query(`DROP INDEX "${other}".feedsync_inbox_pruning`);
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(
        `INSERT INTO "${other}".feedsync_inbox (consumer, source, event_id) VALUES ('x', 'y', 'z')`,
      );
      await expect(migrateInbox(pool, other, { lockTimeoutMs: 100 })).rejects.toMatchObject({
        code: 'CONSUMER_LOCKED',
        message: expect.stringMatching(/is locked by another transaction for more than 100 ms/),
      });
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
    await migrateInbox(pool, other);
    await dropSchema(other);
  });
});

describe('pruning and options', () => {
  beforeAll(() => migrateInbox(pool, schema));

  it('a pruning round deletes batch after batch until no row is older than the retention', async () => {
    await pool.query(
      `INSERT INTO "${schema}".feedsync_inbox (consumer, source, event_id, processed_at)
       SELECT 'busy', 'default', 'old' || i, now() - interval '8 days' - i * interval '1 second'
         FROM generate_series(1, 2550) i`,
    );
    await pool.query(
      `INSERT INTO "${schema}".feedsync_inbox (consumer, source, event_id)
       SELECT 'busy', 'default', 'new' || i FROM generate_series(1, 50) i`,
    );
    const { logger, text } = captureLogger({ level: 'info' });
    const stop = startPruning({
      pool,
      schema,
      name: 'busy',
      hours: 168,
      timeoutMs: 10_000,
      lockTimeoutMs: 1_000,
      logger,
      // 26 batches: more than a round of the old fixed cap (20) held.
      batch: 100,
      firstAfterMs: 0,
    });
    try {
      await waitFor(() => text().includes('inbox pruned'), { what: 'a pruning round' });
    } finally {
      await stop();
    }
    expect(await inboxRows('busy')).toBe(50);
    expect(JSON.parse(text().trim().split('\n').at(-1)!)).toMatchObject({ deleted: 2550, batches: 26 });
  });

  it.each([
    [{ retentionHours: -1 }, /^retentionHours: must be a whole number of hours from 168 to 87600; got -1$/],
    [{ retentionHours: 24 }, /^retentionHours: .* got 24$/],
    [{ retentionHours: 200.5 }, /^retentionHours: /],
    [{ retentionHours: Number.NaN }, /^retentionHours: .* got NaN$/],
    [{ concurrency: 0 }, /^concurrency: /],
    [
      { handlerTimeoutMs: 2 ** 31 },
      /^handlerTimeoutMs: must be a whole number of milliseconds from 1 to 2147483647/,
    ],
    [{ lockTimeoutMs: 0 }, /^lockTimeoutMs: /],
    [{ closeTimeoutMs: -5 }, /^closeTimeoutMs: /],
    [
      { handlers: { 'email.bounce': async () => {} } },
      /^handlers: "email.bounce" is not a type feedsync routes/,
    ],
    [{ handlers: { 'email.bounced': 'no' } }, /^handlers\['email.bounced'\]: must be a function$/],
    [{ handlers: null }, /^handlers: must be an object/],
    [{ pool: {} }, /^pool: must be a pg Pool/],
    [{ queues: { prefix: 'a:b' } }, /^queues.prefix: must be non-empty, without ":" or spaces; got "a:b"$/],
    [{ queues: { emailEvents: '' } }, /^queues.emailEvents: /],
  ])('createConsumer refuses %o with CONSUMER_BAD_OPTION', (bad, message) => {
    const opts = { name: 'x', pool, handlers: {}, schema, env, ...bad } as unknown as ConsumerOptions;
    expect(() => createConsumer(opts)).toThrow(
      expect.objectContaining({ code: 'CONSUMER_BAD_OPTION', message: expect.stringMatching(message) }),
    );
  });

  it('a handler that throws a string, null or undefined fails its job, which is retried', async () => {
    const { logger, text } = captureLogger({ level: 'info' });
    const thrown: Record<string, unknown> = { t1: 'not an error', t2: null, t3: undefined };
    const tries = new Map<string, number>();
    const consumer = createConsumer({
      name: 'throws',
      pool,
      schema,
      env,
      logger,
      handlers: {
        'contact.subscribed': async (event, db) => {
          tries.set(event.id, (tries.get(event.id) ?? 0) + 1);
          await db.query(`INSERT INTO "${schema}".effects (event_id, note) VALUES ($1, 'throws')`, [
            event.id,
          ]);
          if (tries.get(event.id) === 1) throw thrown[event.id];
        },
      },
    });
    const running = consumer.run();
    try {
      for (const id of Object.keys(thrown)) {
        await add(
          { source: 'default', id, type: 'contact.subscribed', created_at: 'x', data: {} } as FeedsyncEvent,
          queues.contact,
        );
      }
      for (const id of Object.keys(thrown)) {
        await waitFor(async () => (await queues.contact.getJob(`default/${id}`))?.isCompleted(), {
          what: `job ${id}`,
        });
        expect((await queues.contact.getJob(`default/${id}`))?.attemptsMade).toBe(2);
        expect((await effects()).get(id)).toBe(1);
      }
    } finally {
      await consumer.close();
      await running;
    }
    const log = text();
    expect(log).toContain('the handler threw the string \\"not an error\\", not an Error');
    expect(log).toContain('the handler threw null, not an Error');
    expect(log).toContain('the handler threw undefined, not an Error');
  });
});

describe('errors at start', () => {
  it('run() with Redis down rejects with one line naming REDIS_URL and the address', async () => {
    const port = await freePort();
    const consumer = createConsumer({
      name: 'down',
      pool,
      schema,
      handlers: {},
      logger: captureLogger().logger,
      // Redis's own errors, whichever backend this run's other tests use.
      env: { ...env, QUEUE_BACKEND: 'redis', REDIS_URL: `redis://127.0.0.1:${port}` },
    });
    await migrateInbox(pool, schema);
    await expect(consumer.run()).rejects.toMatchObject({
      name: 'RedisError',
      code: 'REDIS_ERROR',
      message: `REDIS_URL: cannot reach Redis at 127.0.0.1:${port} (ECONNREFUSED)`,
    });
  });

  it('run() against a listener that never answers rejects with REDIS_TIMEOUT naming the address', async () => {
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => {
      sockets.add(socket);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as { port: number };
    try {
      const consumer = createConsumer({
        name: 'silent',
        pool,
        schema,
        handlers: {},
        logger: captureLogger().logger,
        connectTimeoutMs: 300,
        // Redis's own errors, whichever backend this run's other tests use.
        env: { ...env, QUEUE_BACKEND: 'redis', REDIS_URL: `redis://127.0.0.1:${port}` },
      });
      await migrateInbox(pool, schema);
      await expect(consumer.run()).rejects.toMatchObject({
        code: 'REDIS_TIMEOUT',
        message: `REDIS_URL: Redis at 127.0.0.1:${port} did not answer within 300 ms`,
      });
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it('warns of a misspelt variable in its environment, once', () => {
    const { logger, text } = captureLogger({ level: 'info' });
    for (let i = 0; i < 2; i++) {
      createConsumer({
        name: 'typo',
        pool,
        schema,
        handlers: {},
        logger,
        env: { ...env, QUEUE_PREFX: 'mine' },
      });
    }
    const lines = text().trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({
      level: 40,
      msg: 'QUEUE_PREFX is not a variable feedsync reads, so it is ignored; did you mean QUEUE_PREFIX?',
    });
  });
});
