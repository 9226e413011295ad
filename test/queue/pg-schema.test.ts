import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { createConsumer } from '../../src/consumer/index.js';
import { runDoctor } from '../../src/doctor/doctor.js';
import { queueSchemaVersion } from '../../src/queue/pg-queues.js';
import { testEnv } from '../support/config.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import { killChildren, runCli } from '../support/processes.js';
import { useSimulator } from '../support/simulator.js';

// The queues' schema in Postgres: `feedsync migrate` makes it (two at once included),
// a worker and a consumer refuse to start on one not migrated, and doctor says which.

const sim = useSimulator({ backlog: 20 });
const made: string[] = [];
afterAll(async () => {
  await killChildren();
  for (const schema of made) await dropSchema(schema);
});

function sandbox(label: string) {
  const schema = uniqueSchema(`pgq_${label}`);
  const prefix = uniqueSchema(`pgq_q_${label}`);
  made.push(schema, prefix);
  const env = {
    ...testEnv(
      { schema, prefix, baseUrl: sim().baseUrl },
      { QUEUE_BACKEND: 'postgres', QUEUE_DATABASE_URL: TEST_DATABASE_URL },
    ),
    PATH: process.env.PATH ?? '',
  };
  return { schema, prefix, env };
}

describe("the queues' schema", () => {
  it('two `feedsync migrate` at once both succeed and leave it at the latest version', async () => {
    const box = sandbox('twice');
    const runs = await Promise.all([
      runCli(['migrate'], box.env, 60_000),
      runCli(['migrate'], box.env, 60_000),
    ]);
    for (const run of runs) expect(run.code, run.stderr).toBe(0);
    const { version, latest } = await queueSchemaVersion(
      { url: TEST_DATABASE_URL, schema: box.prefix },
      5_000,
    );
    expect(version).toBe(latest);
    // Each migration recorded once: the second run found it done.
    const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await client.connect();
    try {
      const { rows } = await client.query<{ n: number; distinct: number }>(
        `SELECT count(*)::int AS n, count(DISTINCT version)::int AS distinct FROM "${box.prefix}".migration`,
      );
      expect(rows[0]!.n).toBe(rows[0]!.distinct);
    } finally {
      await client.end();
    }
  });

  it('not migrated: sync exits 2 saying to run migrate, the consumer refuses, doctor fails queues-schema', async () => {
    const box = sandbox('unmigrated');
    // feedsync's own tables only: the queues' schema is left out.
    const own = await runCli(['migrate'], { ...box.env, QUEUE_BACKEND: 'redis' }, 60_000);
    expect(own.code, own.stderr).toBe(0);
    const sync = await runCli(['sync', '--once'], box.env, 60_000);
    expect(sync.code, sync.stderr).toBe(2);
    expect(sync.stderr).toContain('feedsync migrate');
    expect(sync.stderr).toContain(box.prefix);

    const pool = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 2 });
    try {
      const consumer = createConsumer({
        name: 'unmigrated',
        pool,
        schema: box.schema,
        env: box.env,
        handlers: {},
      });
      await consumer.migrate();
      await expect(consumer.run()).rejects.toMatchObject({ code: 'QUEUE_NOT_MIGRATED' });
    } finally {
      await pool.end();
    }

    const before = await runDoctor({ load: () => loadConfig(box.env), timeoutMs: 3_000 });
    const byName = new Map(before.checks.map((c) => [c.name, c]));
    expect(byName.get('queues-postgres')?.status).toBe('ok');
    expect(byName.get('queues-schema')).toMatchObject({
      status: 'fail',
      fix: expect.stringContaining('feedsync migrate'),
    });
    expect(byName.has('redis')).toBe(false);

    // `sync --migrate` migrates both, then doctor finds the schema at this BullMQ's version.
    const migrated = await runCli(['sync', '--once', '--migrate'], box.env, 60_000);
    expect(migrated.code, migrated.stderr).toBe(0);
    const after = await runDoctor({ load: () => loadConfig(box.env), timeoutMs: 3_000 });
    const now = new Map(after.checks.map((c) => [c.name, c]));
    expect(now.get('queues-schema')).toMatchObject({
      status: 'ok',
      message: expect.stringMatching(/BullMQ migration \d+/),
    });
    expect(now.get('queues')).toMatchObject({
      status: 'ok',
      message: expect.stringContaining(`schema "${box.prefix}"`),
    });
  });
});
