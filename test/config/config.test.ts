import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { secretsOf } from '../../src/config/secrets.js';
import { configForSource, requireService } from '../../src/config/source-config.js';
import { ConfigError } from '../../src/errors.js';

const files: Record<string, string> = {
  '/run/key': 'svc_live_fromfile\n',
  '/run/secret': 'whsec_a, whsec_b',
};
const readFile = (p: string): string => {
  const text = files[p];
  if (text === undefined) throw Object.assign(new Error('missing'), { code: 'ENOENT' });
  return text;
};

function error(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env, readFile);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).exitCode).toBe(2);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig', () => {
  it('has the documented defaults and is frozen', () => {
    const c = loadConfig({}, readFile);
    expect(c.feed).toMatchObject({
      baseUrl: null,
      apiKey: null,
      source: 'default',
      types: null,
      pageLimit: 100,
    });
    expect(c.feed.maxRetryWaitMs).toBe(600_000);
    expect(c.database).toEqual({
      url: 'postgres://postgres@127.0.0.1:5432/postgres',
      schema: 'feedsync',
      connectTimeoutMs: 10_000,
      statementTimeoutMs: 10_000,
    });
    expect(c.syncOnceMaxMs).toBe(900_000);
    expect(c.redis.url).toBe('redis://127.0.0.1:6379');
    expect(c.queues).toMatchObject({
      backend: 'redis',
      databaseUrl: 'postgres://postgres@127.0.0.1:5432/postgres',
      prefix: 'bull',
      emailEvents: 'email-events',
      contactEvents: 'contact-events',
      jobAttempts: 5,
      jobBackoffMs: 1_000,
    });
    expect(c.eventsRetentionDays).toBeNull();
    expect([c.syncIntervalMs, c.metricsPort, c.webhooks.port, c.logLevel]).toEqual([
      30_000,
      9464,
      8080,
      'info',
    ]);
    expect(Object.isFrozen(c) && Object.isFrozen(c.feed)).toBe(true);
  });

  it('QUEUE_BACKEND=postgres: the queues in QUEUE_DATABASE_URL (default DATABASE_URL), in the schema QUEUE_PREFIX', () => {
    const url = 'postgres://app:pw-queues@db.internal:5432/app';
    const same = loadConfig({ QUEUE_BACKEND: 'postgres', DATABASE_URL: url, QUEUE_PREFIX: 'jobs' }, readFile);
    expect(same.queues).toMatchObject({ backend: 'postgres', databaseUrl: url, prefix: 'jobs' });
    const apart = loadConfig(
      { QUEUE_BACKEND: 'postgres', QUEUE_DATABASE_URL: 'postgresql://q@queues.internal/q' },
      readFile,
    );
    expect(apart.queues.databaseUrl).toBe('postgresql://q@queues.internal/q');
    expect(secretsOf(same)).toContain('pw-queues');
    expect(error({ QUEUE_BACKEND: 'mysql' }).message).toMatch(/^QUEUE_BACKEND: /);
    // The default prefix is a schema name; a Redis prefix with a dash is not.
    expect(error({ QUEUE_BACKEND: 'postgres', QUEUE_PREFIX: 'my-app' }).message).toMatch(
      /^QUEUE_PREFIX: .*lowercase SQL identifier/,
    );
    expect(error({ QUEUE_BACKEND: 'postgres', QUEUE_DATABASE_URL: 'redis://x' }).message).toMatch(
      /^QUEUE_DATABASE_URL: must start with postgres:/,
    );
    // With Redis, QUEUE_DATABASE_URL is not read for the queues, and a dash stays allowed.
    expect(loadConfig({ QUEUE_PREFIX: 'my-app' }, readFile).queues.prefix).toBe('my-app');
  });

  it("reads the connect timeout and the once run's limit, and refuses a zero", () => {
    const c = loadConfig({ DATABASE_CONNECT_TIMEOUT_MS: '2500', SYNC_ONCE_MAX_MS: '60000' }, readFile);
    expect([c.database.connectTimeoutMs, c.syncOnceMaxMs]).toEqual([2_500, 60_000]);
    expect(() => loadConfig({ DATABASE_CONNECT_TIMEOUT_MS: '0' }, readFile)).toThrow(
      'DATABASE_CONNECT_TIMEOUT_MS: must be at least 1',
    );
    expect(() => loadConfig({ SYNC_ONCE_MAX_MS: 'soon' }, readFile)).toThrow(
      'SYNC_ONCE_MAX_MS: must be a positive whole number',
    );
    expect(() => loadConfig({ SYNC_INTERVAL_MS: '-1' }, readFile)).toThrow(
      'SYNC_INTERVAL_MS: must be a positive whole number',
    );
  });

  it("refuses a duration past Node's longest timer, naming the variable, instead of a timer that fires at once", () => {
    for (const name of [
      'SYNC_ONCE_MAX_MS',
      'SYNC_INTERVAL_MS',
      'FEED_TIMEOUT_MS',
      'FEED_MAX_RETRY_WAIT_MS',
    ]) {
      expect(loadConfig({ [name]: '2147483647' }, readFile)).toBeTruthy();
      for (const value of ['2147483648', '4294967296', '99999999999999']) {
        expect(() => loadConfig({ [name]: value }, readFile)).toThrow(`${name}: must be at most 2147483647`);
      }
    }
  });

  it('reads the statement deadline, which must stay below the lease', () => {
    expect(loadConfig({}, readFile).database.statementTimeoutMs).toBe(10_000);
    const c = loadConfig({ DATABASE_STATEMENT_TIMEOUT_MS: '2000', SOURCE_LEASE_MS: '5000' }, readFile);
    expect(c.database.statementTimeoutMs).toBe(2_000);
    expect(() => loadConfig({ DATABASE_STATEMENT_TIMEOUT_MS: '30000' }, readFile)).toThrow(
      'DATABASE_STATEMENT_TIMEOUT_MS: must be below SOURCE_LEASE_MS (30000)',
    );
    // Unset, it stays just under a lease shorter than its default.
    expect(loadConfig({ SOURCE_LEASE_MS: '1000' }, readFile).database.statementTimeoutMs).toBe(999);
  });

  it('reads the job retries and the events retention', () => {
    const c = loadConfig({ JOB_ATTEMPTS: '1', JOB_BACKOFF_MS: '250', EVENTS_RETENTION_DAYS: '90' }, readFile);
    expect(c.queues).toMatchObject({ jobAttempts: 1, jobBackoffMs: 250 });
    expect(c.eventsRetentionDays).toBe(90);
  });

  it('reads secrets from *_FILE variables', () => {
    const c = loadConfig({ FEED_API_KEY_FILE: '/run/key', WEBHOOK_SECRET_FILE: '/run/secret' }, readFile);
    expect(c.feed.apiKey).toBe('svc_live_fromfile');
    expect(c.webhooks.secrets).toEqual(['whsec_a', 'whsec_b']);
  });

  it('normalises FEED_TYPES: trimmed, unique, sorted', () => {
    const c = loadConfig({ FEED_TYPES: ' email.delivered,contact.subscribed,email.delivered ' }, readFile);
    expect(c.feed.types).toEqual(['contact.subscribed', 'email.delivered']);
  });

  it.each([
    [{ FEED_PAGE_LIMIT: 'ten' }, 'FEED_PAGE_LIMIT'],
    [{ FEED_PAGE_LIMIT: '0' }, 'FEED_PAGE_LIMIT'],
    [{ SYNC_INTERVAL_MS: '-5' }, 'SYNC_INTERVAL_MS'],
    [{ METRICS_PORT: '70000' }, 'METRICS_PORT'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    [{ DATABASE_SCHEMA: 'Robert"; DROP' }, 'DATABASE_SCHEMA'],
    [{ QUEUE_PREFIX: 'a:b' }, 'QUEUE_PREFIX'],
    [{ FEED_TYPES: 'delivered' }, 'FEED_TYPES'],
    [{ FEED_TYPES: 'email.delivred' }, 'FEED_TYPES'],
    [{ METRICS_HOST: 'not a host' }, 'METRICS_HOST'],
    [{ WEBHOOK_HOST: 'http://0.0.0.0' }, 'WEBHOOK_HOST'],
    [{ DATABASE_URL: 'postgres://u:50%@h/db' }, 'DATABASE_URL'],
    [{ REDIS_URL: 'redis://:pa%zzss@cache:6379' }, 'REDIS_URL'],
    [{ DATABASE_URL: 'postgres://h/db?password=50%' }, 'DATABASE_URL'],
    [{ FEED_BASE_URL: 'https://api.example.com/v1' }, 'FEED_BASE_URL'],
    [{ FEED_BASE_URL: 'http://api.example.com/api' }, 'FEED_BASE_URL'],
    [{ FEED_BASE_URL: 'not a url' }, 'FEED_BASE_URL'],
    [{ DATABASE_URL: 'mysql://x@y/z' }, 'DATABASE_URL'],
    [{ REDIS_URL: 'http://localhost' }, 'REDIS_URL'],
    [{ FEED_API_KEY_FILE: '/nope' }, 'FEED_API_KEY_FILE'],
    [{ FEED_API_KEY: 'svc_test_x', FEED_API_KEY_FILE: '/run/key' }, 'FEED_API_KEY'],
    [{ PUSHGATEWAY_URL: 'nope' }, 'PUSHGATEWAY_URL'],
    [{ JOB_ATTEMPTS: '0' }, 'JOB_ATTEMPTS'],
    [{ JOB_BACKOFF_MS: '1.5' }, 'JOB_BACKOFF_MS'],
    [{ EVENTS_RETENTION_DAYS: '0' }, 'EVENTS_RETENTION_DAYS'],
    [{ EVENTS_RETENTION_DAYS: '30d' }, 'EVENTS_RETENTION_DAYS'],
  ])('refuses %o, naming the variable', (env, name) => {
    expect(error(env).message.startsWith(name)).toBe(true);
  });

  it.each([
    [{ FEED_PAGE_LIMIT: 'ten' }, 'FEED_PAGE_LIMIT: must be a positive whole number'],
    [{ FEED_PAGE_LIMIT: '0' }, 'FEED_PAGE_LIMIT: must be at least 1'],
    [{ FEED_PAGE_LIMIT: '10001' }, 'FEED_PAGE_LIMIT: must be at most 10000'],
    [{ FEED_MAX_RETRY_WAIT_MS: '99999999999999999999' }, 'FEED_MAX_RETRY_WAIT_MS: is too large'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL: must be one of fatal, error, warn, info, debug, trace, silent'],
    [{ REDIS_CLUSTER: 'yes' }, 'REDIS_CLUSTER: must be true or false'],
    [{ PUSHGATEWAY_URL: 'nope' }, 'PUSHGATEWAY_URL: must be a URL'],
    [{ FEED_SOURCE: 'x'.repeat(201) }, 'FEED_SOURCE: must be at most 200 characters'],
    [{ OUTBOX_RETENTION_HOURS: '2147483648' }, 'OUTBOX_RETENTION_HOURS: must be at most 87600'],
    [{ OUTBOX_RETENTION_HOURS: '87601' }, 'OUTBOX_RETENTION_HOURS: must be at most 87600'],
  ])('says what is wrong with %o in words', (env, message) => {
    expect(error(env).message).toBe(message);
  });

  it("FEED_SOURCE's length limit is its own: keys and secrets share only the non-empty check", () => {
    const c = loadConfig({ FEED_API_KEY: 'k'.repeat(300), WEBHOOK_SECRET: 's'.repeat(300) }, readFile);
    expect(c.feed.apiKey).toHaveLength(300);
    expect(c.webhooks.secrets[0]).toHaveLength(300);
  });

  it('accepts https anywhere and http to loopback only', () => {
    expect(loadConfig({ FEED_BASE_URL: 'https://api.example.com/api/' }, readFile).feed.baseUrl).toBe(
      'https://api.example.com/api',
    );
    for (const host of ['127.0.0.1:4010', 'localhost', '[::1]:8080']) {
      expect(loadConfig({ FEED_BASE_URL: `http://${host}/api` }, readFile).feed.baseUrl).toBe(
        `http://${host}/api`,
      );
    }
  });

  it('never puts a secret value into its messages', () => {
    const e = error({ DATABASE_URL: 'postgres://u:hunter2secret@h/db', METRICS_PORT: 'x' });
    expect(e.message).not.toContain('hunter2secret');
    expect(error({ FEED_BASE_URL: 'http://user:pw-secret-1@example.com/api' }).message).not.toContain(
      'pw-secret-1',
    );
  });

  it('requireService names what is missing', () => {
    expect(() => requireService(loadConfig({}, readFile))).toThrow(/FEED_BASE_URL/);
    expect(() => requireService(loadConfig({ FEED_BASE_URL: 'http://127.0.0.1/api' }, readFile))).toThrow(
      /FEED_API_KEY/,
    );
  });

  it('lists every secret for the logger to scrub', () => {
    const c = loadConfig(
      {
        FEED_API_KEY: 'svc_live_abcdef',
        WEBHOOK_SECRET: 'whsec_one,whsec_two',
        DATABASE_URL: 'postgres://app:p%40ss-word@db/app',
        REDIS_URL: 'redis://:redis-pass@cache:6379',
      },
      readFile,
    );
    expect(secretsOf(c)).toEqual(
      expect.arrayContaining(['svc_live_abcdef', 'whsec_one', 'whsec_two', 'p@ss-word', 'redis-pass']),
    );
  });

  it('says which known type a typo in FEED_TYPES was meant to be, and takes a new type marked with +', () => {
    expect(error({ FEED_TYPES: 'email.delivered,email.delivred' }).message).toBe(
      'FEED_TYPES: "email.delivred" is not an event type of this release; did you mean email.delivered? ' +
        '(for a type the service added since, write it as +email.delivred)',
    );
    expect(error({ FEED_TYPES: 'foo.bar' }).message).toMatch(
      /^FEED_TYPES: "foo\.bar" .*did you mean email\.\w+\?/,
    );
    expect(error({ FEED_TYPES: 'bounced' }).message).toContain('did you mean email.bounced?');
    const c = loadConfig({ FEED_TYPES: 'email.bounced, +email.opened' }, readFile);
    expect(c.feed.types).toEqual(['email.bounced', 'email.opened']);
  });

  it('a bad %-escape in a URL names the variable and never the password (exit 2, not "URI malformed")', () => {
    const e = error({ DATABASE_URL: 'postgres://app:s3cret%zz@db/app' });
    expect(e.message).toBe('DATABASE_URL: the password holds a bad %-escape (write a literal % as %25)');
    expect(e.message).not.toContain('s3cret');
  });

  it('METRICS_HOST and WEBHOOK_HOST default to every interface and take an address', () => {
    const d = loadConfig({}, readFile);
    expect([d.metricsHost, d.webhooks.host]).toEqual(['0.0.0.0', '0.0.0.0']);
    const c = loadConfig({ METRICS_HOST: '127.0.0.1', WEBHOOK_HOST: '[::1]' }, readFile);
    expect([c.metricsHost, c.webhooks.host]).toEqual(['127.0.0.1', '::1']);
  });

  it('lists the variables the environment set', () => {
    const c = loadConfig({ DATABASE_SCHEMA: 'mine', FEED_API_KEY_FILE: '/run/key', LOG_LEVEL: '' }, readFile);
    expect([...c.given].sort()).toEqual(['DATABASE_SCHEMA', 'FEED_API_KEY']);
  });

  it.each([
    ['DATABASE_URL', 'postgres://app:userinfo-pw1@db/app'],
    ['DATABASE_URL', 'postgres://app@db/app?password=query-pw1'],
    ['DATABASE_URL', 'postgres://app@db/app?sslmode=require&sslpassword=ssl-pw1'],
    ['DATABASE_URL', 'postgres://app:p%40ss-pw1@db/app'],
    ['REDIS_URL', 'redis://:userinfo-pw2@cache:6379'],
    ['REDIS_URL', 'redis://cache:6379/?password=query-pw2'],
    ['REDIS_URL', 'redis://cache:6379/0?db=0&password=query%2Bpw3'],
  ])('secretsOf takes the password of %s in the form %s', (name, url) => {
    const c = loadConfig({ [name]: url }, readFile);
    const password = /userinfo-pw\d|query-pw\d|ssl-pw\d|p@ss-pw1|query\+pw3/.exec(
      decodeURIComponent(url),
    )![0];
    expect(secretsOf(c)).toContain(password);
  });
});

describe('FEED_RATE_SHARE and FEED_MAX_REQUESTS_PER_SECOND', () => {
  it('default to half of a stated budget and no cap of our own', () => {
    const c = loadConfig({}, () => '');
    expect(c.feed.rateShare).toBe(0.5);
    expect(c.feed.maxRequestsPerSecond).toBeNull();
    const set = loadConfig({ FEED_RATE_SHARE: '0.25', FEED_MAX_REQUESTS_PER_SECOND: '2.5' }, () => '');
    expect([set.feed.rateShare, set.feed.maxRequestsPerSecond]).toEqual([0.25, 2.5]);
  });

  it.each([
    ['FEED_RATE_SHARE', '0'],
    ['FEED_RATE_SHARE', '1.5'],
    ['FEED_RATE_SHARE', 'half'],
    ['FEED_MAX_REQUESTS_PER_SECOND', '0'],
    ['FEED_MAX_REQUESTS_PER_SECOND', '-1'],
    ['FEED_MAX_REQUESTS_PER_SECOND', 'fast'],
  ])('%s=%s stops the program at start, naming the variable (exit 2)', (name, value) => {
    expect(error({ [name]: value }).message).toMatch(new RegExp(`^${name}: must be`));
  });

  it('a sources file sets both per source; what an entry leaves out is the variables', () => {
    const file = JSON.stringify({
      sources: [
        { source: 'hot', api_key_env: 'K', rate_share: 0.2, max_requests_per_second: 3 },
        { source: 'plain', api_key_env: 'K' },
        { source: 'uncapped', api_key_env: 'K', max_requests_per_second: null },
      ],
    });
    const env = {
      FEED_SOURCES_FILE: '/s.json',
      FEED_BASE_URL: 'https://svc.example/api',
      K: 'svc_live_acme_0123456789',
      FEED_MAX_REQUESTS_PER_SECOND: '7',
    };
    files['/s.json'] = file;
    files['/bad.json'] = JSON.stringify({ sources: [{ source: 'hot', api_key_env: 'K', rate_share: 2 }] });
    const config = loadConfig(env, readFile);
    const of = (s: string) => configForSource(config, s).feed;
    expect([of('hot').rateShare, of('hot').maxRequestsPerSecond]).toEqual([0.2, 3]);
    expect([of('plain').rateShare, of('plain').maxRequestsPerSecond]).toEqual([0.5, 7]);
    expect(of('uncapped').maxRequestsPerSecond).toBeNull();
    expect(error({ ...env, FEED_SOURCES_FILE: '/bad.json' }).message).toContain(
      'sources[0] ("hot"): rate_share: must be a number above 0 and at most 1',
    );
  });
});
