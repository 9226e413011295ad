import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { runDoctor } from '../../src/doctor/doctor.js';
import { formatReport } from '../../src/doctor/report.js';
import { createStore, type Store } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrate.js';
import { testEnv } from '../support/config.js';
import { dropSchema, TEST_DATABASE_URL, testDatabaseUrlWith, uniqueSchema } from '../support/postgres.js';
import { freePort, type RedisServer, runCli, startRedisServer } from '../support/processes.js';
import { deletePrefix, uniquePrefix } from '../support/redis.js';
import { startTestSimulator, TEST_API_KEY } from '../support/simulator.js';

const schema = uniqueSchema('doctor');
const empty = uniqueSchema('doctor_empty');
const prefix = uniquePrefix('doctor');
let store: Store;
let sim: Awaited<ReturnType<typeof startTestSimulator>>;
let strict: Awaited<ReturnType<typeof startTestSimulator>>;
let redis: RedisServer;

beforeAll(async () => {
  store = createStore({ url: TEST_DATABASE_URL, schema });
  await migrate(store);
  sim = await startTestSimulator();
  strict = await startTestSimulator({ keyPrefix: 'acme' });
  redis = await startRedisServer();
});
afterAll(async () => {
  await store.close();
  await sim.close();
  await strict.close();
  await redis.dispose();
  await dropSchema(schema);
  await dropSchema(empty);
  await deletePrefix(prefix);
});

/** The report for the test environment with some variables changed. */
function diagnose(extra: Record<string, string> = {}, opts: { schema?: string } = {}) {
  const env = testEnv({ schema: opts.schema ?? schema, prefix, baseUrl: sim.baseUrl }, extra);
  return runDoctor({ load: () => loadConfig(env), timeoutMs: 3000 });
}

function statusOf(report: Awaited<ReturnType<typeof runDoctor>>): Record<string, string> {
  return Object.fromEntries(report.checks.map((c) => [c.name, c.status]));
}

describe('feedsync doctor', () => {
  it('finds all well with a good configuration, and prints no secret', async () => {
    const report = await diagnose({ DATABASE_URL: testDatabaseUrlWith({ password: 'hunter2secret' }) });
    expect(statusOf(report)).toEqual({
      config: 'ok',
      postgres: 'ok',
      schema: 'ok',
      cursor: 'ok',
      outbox: 'ok',
      quarantine: 'ok',
      conflicts: 'ok',
      feed: 'ok',
      redis: 'ok',
      'redis-maxmemory-policy': 'ok',
      'redis-wait-replicas': 'ok',
      queues: 'ok',
    });
    expect(report.ok).toBe(true);
    const text = formatReport(report);
    expect(text).toContain('all is well');
    expect(text).toContain('FEED_API_KEY set (a test key)');
    expect(text).toContain(`DATABASE_SCHEMA=${schema}`);
    expect(text).not.toContain(TEST_API_KEY);
    expect(text).not.toContain('hunter2secret');
  });

  it('does not say all is well with conflicts recorded: it counts them and says what to do', async () => {
    const table = `"${schema}".conflicts`;
    await store.pool.query(
      `INSERT INTO ${table} (source, event_id, first_sha256, second_sha256, raw, received_via, versions_seen)
       SELECT 'default', 'evt_' || i, 'a', 'b' || i, '{}', 'feed', i FROM generate_series(1, 3) AS i`,
    );
    try {
      const report = await diagnose();
      const conflicts = report.checks.find((c) => c.name === 'conflicts');
      expect(conflicts).toMatchObject({ status: 'warn' });
      expect(conflicts?.message).toContain(
        '3 events came back from the feed with other content than stored (6 versions;',
      );
      expect(conflicts?.fix).toContain(
        `SELECT source, event_id, versions_seen, received_at, raw FROM ${table}`,
      );
      expect(report.ok).toBe(false);
      const text = formatReport(report);
      expect(text).not.toContain('all is well');
      expect(text).toContain('1 problem found');
    } finally {
      await store.pool.query(`DELETE FROM ${table}`);
    }
  });

  it('warns when METRICS_PORT equals WEBHOOK_PORT, naming both', async () => {
    const report = await diagnose({ METRICS_PORT: '8090', WEBHOOK_PORT: '8090' });
    const config = report.checks.find((c) => c.name === 'config');
    expect(config?.status).toBe('warn');
    expect(config?.message).toContain(
      'METRICS_PORT and WEBHOOK_PORT are both 8090: serve-webhooks listens on each, so they must differ',
    );
  });

  it('fails naming Postgres when DATABASE_URL points at the wrong port, and skips what needs it', async () => {
    const port = await freePort();
    const report = await diagnose({ DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/test` });
    const pg = report.checks.find((c) => c.name === 'postgres');
    expect(pg?.status).toBe('fail');
    expect(pg?.message).toContain(`cannot reach Postgres at postgres://postgres@127.0.0.1:${port}/test`);
    expect(pg?.fix).toContain('DATABASE_URL');
    expect(statusOf(report)).toMatchObject({ schema: 'skip', cursor: 'skip', redis: 'ok', feed: 'ok' });
    expect(report.ok).toBe(false);
  });

  it('flags a Redis whose maxmemory-policy evicts, with the fix', async () => {
    // CONFIG SET on the server this file started, never the shared one.
    const admin = redis.admin();
    await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
    admin.disconnect();
    const report = await diagnose({ REDIS_URL: redis.url });
    const policy = report.checks.find((c) => c.name === 'redis-maxmemory-policy');
    expect(policy).toMatchObject({ status: 'warn' });
    expect(policy?.message).toContain('allkeys-lru');
    expect(policy?.fix).toContain('CONFIG SET maxmemory-policy noeviction');
    expect(policy?.fix).toContain('redis.conf');
    expect(report.ok).toBe(false);
  });

  it('fails when Redis is unreachable', async () => {
    const report = await diagnose({ REDIS_URL: `redis://127.0.0.1:${await freePort()}` });
    expect(statusOf(report)).toMatchObject({
      redis: 'fail',
      'redis-maxmemory-policy': 'skip',
      queues: 'skip',
      postgres: 'ok',
    });
  });

  it('flags a pending migration and a schema newer than the build', async () => {
    const pending = await diagnose({}, { schema: empty });
    const check = pending.checks.find((c) => c.name === 'schema');
    expect(check).toMatchObject({ status: 'fail' });
    expect(check?.message).toContain('pending: 0001_init');
    expect(check?.fix).toContain('feedsync migrate');
    expect(statusOf(pending)).toMatchObject({ cursor: 'skip', outbox: 'skip', quarantine: 'skip' });

    await store.pool.query(
      `INSERT INTO "${schema}".kysely_migration (name, timestamp) VALUES ('9999_future', now()::text)`,
    );
    try {
      const newer = await diagnose();
      expect(newer.checks.find((c) => c.name === 'schema')?.message).toContain('newer than this build');
      expect(newer.ok).toBe(false);
    } finally {
      await store.pool.query(`DELETE FROM "${schema}".kysely_migration WHERE name = '9999_future'`);
    }
  });

  it('says the key is rejected on a 401', async () => {
    const report = await diagnose({ FEED_BASE_URL: strict.baseUrl });
    const feed = report.checks.find((c) => c.name === 'feed');
    expect(feed).toMatchObject({ status: 'fail', message: 'the service rejected the key (HTTP 401)' });
    expect(feed?.fix).toContain('FEED_API_KEY');
  });

  it('fails the feed without FEED_BASE_URL (never "all is well"), and a base URL that does not answer', async () => {
    const env = testEnv({ schema, prefix });
    const none = await runDoctor({ load: () => loadConfig(env), timeoutMs: 3000 });
    const feed = none.checks.find((c) => c.name === 'feed');
    expect(feed).toMatchObject({
      status: 'fail',
      message: expect.stringContaining('FEED_BASE_URL is not set'),
    });
    expect(feed?.fix).toContain('feedsync doctor --receiver');
    expect(none.ok).toBe(false);
    expect(formatReport(none)).not.toContain('all is well');
    const down = await diagnose({ FEED_BASE_URL: `http://127.0.0.1:${await freePort()}/api` });
    expect(down.checks.find((c) => c.name === 'feed')?.message).toMatch(/^cannot reach/);
  });

  it('--receiver checks WEBHOOK_SECRET instead of the feed', async () => {
    const env = testEnv({ schema, prefix });
    const receiver = (extra: Record<string, string>) =>
      runDoctor({ load: () => loadConfig({ ...env, ...extra }), timeoutMs: 3000, mode: 'receiver' });
    const good = await receiver({ WEBHOOK_SECRET: 'whsec_doctor_one' });
    expect(statusOf(good)).toMatchObject({ 'webhook-secret': 'ok' });
    expect(statusOf(good).feed).toBeUndefined();
    expect(good.ok).toBe(true);
    const missing = await receiver({});
    expect(statusOf(missing)['webhook-secret']).toBe('fail');
    expect(missing.ok).toBe(false);
  });

  it('never prints a password given in the URL or as a query parameter', async () => {
    const report = await diagnose({
      DATABASE_URL: testDatabaseUrlWith({ search: '?password=pg-query-pw' }),
      REDIS_URL: `redis://127.0.0.1:${await freePort()}/?password=redis-query-pw`,
    });
    const text = `${formatReport(report)}${JSON.stringify(report)}`;
    expect(text).toMatch(/DATABASE_URL=postgres:\/\/postgres@127\.0\.0\.1:5432\/test\?password=\[?REDACTED/);
    expect(text).toMatch(/REDIS_URL=redis:\/\/127\.0\.0\.1:\d+\/\?password=\[?REDACTED/);
    for (const pw of ['pg-query-pw', 'redis-query-pw']) expect(text).not.toContain(pw);
    const userinfo = await diagnose({
      REDIS_URL: `redis://:redis-userinfo-pw@127.0.0.1:${await freePort()}`,
    });
    expect(JSON.stringify(userinfo)).not.toContain('redis-userinfo-pw');
  });

  it('fails a stored cursor that the feed does not know, with the commands that move it', async () => {
    const known = sim.emitContactEvent('contact.subscribed', 'doctor@example.com');
    try {
      await store.pool.query(
        `INSERT INTO "${schema}".cursors (source, after_id, types) VALUES ('it''s mine', 'evt_bogus', NULL)`,
      );
      const report = await diagnose({ FEED_SOURCE: "it's mine" });
      const cursor = report.checks.find((c) => c.name === 'cursor');
      expect(cursor?.status).toBe('fail');
      expect(cursor?.message).toContain('evt_bogus, an id the feed does not know');
      expect(cursor?.fix).toContain(`"feedsync cursor reset --source 'it'\\''s mine'"`);
      await store.pool.query(`UPDATE "${schema}".cursors SET after_id = $1`, [known.id]);
      expect(statusOf(await diagnose({ FEED_SOURCE: "it's mine" })).cursor).toBe('ok');
    } finally {
      await store.pool.query(`TRUNCATE "${schema}".cursors`);
    }
  });

  it('fails a FEED_TYPES with a typo, naming the closest type', async () => {
    const report = await diagnose({ FEED_TYPES: 'email.delivred' });
    expect(report.checks[0]).toMatchObject({ name: 'config', status: 'fail' });
    expect(report.checks[0]?.message).toContain('did you mean email.delivered?');
  });

  it('flags a cursor built with another type filter, a quarantine and a stale outbox', async () => {
    await store.pool.query(
      `INSERT INTO "${schema}".cursors (source, after_id, types) VALUES ('default', $1, '{email.delivered}')`,
      [sim.emitContactEvent('contact.subscribed', 'filter@example.com').id],
    );
    await store.pool.query(
      `INSERT INTO "${schema}".quarantine (source, raw, raw_sha256, reason) VALUES ('default', '"x"', 'abc', 'not an object')`,
    );
    await store.pool.query(
      `INSERT INTO "${schema}".outbox (source, event_id, queue, job_name, payload, created_at)
       VALUES ('default', 'evt_1', 'email-events', 'email.sent', '{}', now() - interval '1 hour')`,
    );
    try {
      const report = await diagnose();
      const cursor = report.checks.find((c) => c.name === 'cursor');
      expect(cursor?.status).toBe('fail');
      expect(cursor?.fix).toContain('feedsync cursor reset --source default');
      expect(statusOf(report)).toMatchObject({ quarantine: 'warn', outbox: 'warn' });
      // The quarantine holds webhook bodies too: it does not call them all feed items.
      expect(report.checks.find((c) => c.name === 'quarantine')?.message).toMatch(
        /^1 item \(feed items or webhook bodies\) could not be stored/,
      );
      const same = await diagnose({ FEED_TYPES: 'email.delivered' });
      expect(statusOf(same).cursor).toBe('ok');
      expect(same.checks.find((c) => c.name === 'cursor')?.message).toContain(', types email.delivered,');
      await store.pool.query(`UPDATE "${schema}".cursors SET types = NULL`);
      const all = await diagnose();
      expect(all.checks.find((c) => c.name === 'cursor')?.message).toMatch(/, all types, last success/);
    } finally {
      await store.pool.query(
        `TRUNCATE "${schema}".cursors, "${schema}".quarantine, "${schema}".outbox, "${schema}".events`,
      );
    }
  });

  it('reports a configuration that does not load as a failed check', async () => {
    const report = await runDoctor({ load: () => loadConfig({ FEED_PAGE_LIMIT: 'many' }) });
    expect(report).toMatchObject({ ok: false, checks: [{ name: 'config', status: 'fail' }] });
    expect(report.checks[0]?.message).toContain('FEED_PAGE_LIMIT');
  });

  it('runs as `feedsync doctor`: exit 0 when all is well, 1 otherwise, --json', async () => {
    const env = { PATH: process.env.PATH ?? '', ...testEnv({ schema, prefix, baseUrl: sim.baseUrl }) };
    const good = await runCli(['doctor'], env);
    expect(good.code).toBe(0);
    expect(good.stdout).toContain('all is well');
    const json = await runCli(['doctor', '--json'], { ...env, REDIS_URL: `redis://127.0.0.1:${redis.port}` });
    expect(json.code).toBe(1);
    const parsed = JSON.parse(json.stdout) as { ok: boolean; checks: { name: string; status: string }[] };
    expect(parsed.ok).toBe(false);
    expect(parsed.checks.find((c) => c.name === 'redis-maxmemory-policy')?.status).toBe('warn');
    const broken = await runCli(['doctor'], { ...env, FEED_PAGE_LIMIT: 'many' });
    expect(broken.code).toBe(1);
    expect(broken.stdout).toMatch(/^fail {2}config {2}FEED_PAGE_LIMIT/);
    expect(`${good.stdout}${json.stdout}${broken.stdout}`).not.toContain(TEST_API_KEY);
  });
});
