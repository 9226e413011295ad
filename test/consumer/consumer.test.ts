import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pruneInbox } from '../../src/consumer/inbox.js';
import { createConsumer, type FeedsyncEvent, migrateInbox, withInbox } from '../../src/consumer/index.js';
import { jobIdFor, jobOptionsFor } from '../../src/queue/routes.js';
import { captureLogger } from '../support/logs.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import { waitFor } from '../support/processes.js';
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
