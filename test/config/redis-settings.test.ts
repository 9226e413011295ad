import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { hashTagOf, parseRedisSettings } from '../../src/config/redis-settings.js';
import { secretsOf } from '../../src/config/secrets.js';
import { ConfigError } from '../../src/errors.js';

function configError(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).exitCode).toBe(2);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('Redis settings', () => {
  it('one URL: the server, its credentials, database and scheme; cluster mode left to the server', () => {
    const r = loadConfig({ REDIS_URL: 'rediss://app:p%40ss@cache.internal:6380/2' }).redis;
    expect(r).toMatchObject({
      nodes: [{ host: 'cache.internal', port: 6380 }],
      tls: true,
      username: 'app',
      password: 'p@ss',
      db: 2,
      cluster: null,
      sentinel: null,
    });
    expect(loadConfig({}).redis).toMatchObject({
      nodes: [{ host: '127.0.0.1', port: 6379 }],
      tls: false,
      db: 0,
    });
  });

  it('a password or database given as a query parameter is honoured as ioredis does; other parameters are refused', () => {
    const env = { REDIS_URL: 'redis://cache.internal:6379/?password=s3cr%26t&db=3' };
    expect(loadConfig(env).redis).toMatchObject({ password: 's3cr&t', db: 3 });
    expect(secretsOf(loadConfig(env))).toContain('s3cr&t');
    const err = configError({ REDIS_URL: 'redis://cache.internal:6379/?family=6&password=hunter22' });
    expect(err.message).toContain('REDIS_URL');
    expect(err.message).toContain('family');
    expect(err.message).not.toContain('hunter22');
  });

  it('several seed nodes, as URLs or bare host:port taking the first one’s scheme and password', () => {
    const r = parseRedisSettings({
      REDIS_URL: 'rediss://:pw@a.example:7000, b.example:7001,rediss://c.example',
      REDIS_CLUSTER: true,
    });
    expect(r.nodes).toEqual([
      { host: 'a.example', port: 7000 },
      { host: 'b.example', port: 7001 },
      { host: 'c.example', port: 6379 },
    ]);
    expect([r.tls, r.password, r.cluster]).toEqual([true, 'pw', true]);
    expect(parseRedisSettings({ REDIS_URL: '[::1]:7000,redis://[::1]:7001' }).nodes).toEqual([
      { host: '::1', port: 7000 },
      { host: '::1', port: 7001 },
    ]);
  });

  it('Sentinel: the Sentinels, the master name, and the master’s credentials and TLS from REDIS_URL', () => {
    const r = loadConfig({
      REDIS_URL: 'rediss://:masterpw@ignored/1',
      REDIS_SENTINELS: 's1:26379,s2,rediss://:sentpw@s3:26380',
      REDIS_SENTINEL_NAME: 'mymaster',
    }).redis;
    expect(r.sentinel).toEqual({
      nodes: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26379 },
        { host: 's3', port: 26380 },
      ],
      name: 'mymaster',
      tls: true,
      username: null,
      password: 'sentpw',
    });
    expect([r.tls, r.password, r.db]).toEqual([true, 'masterpw', 1]);
    const plainSentinels = parseRedisSettings({
      REDIS_URL: 'rediss://x',
      REDIS_SENTINELS: 'redis://s1:26379',
      REDIS_SENTINEL_NAME: 'm',
    });
    expect([plainSentinels.tls, plainSentinels.sentinel?.tls]).toEqual([true, false]);
  });

  it('every Redis password is scrubbed from logs, as given and %-encoded', () => {
    const config = loadConfig({
      REDIS_URL: 'redis://:p%40ssword1@h',
      REDIS_SENTINELS: 'redis://:sentinel-pw@s:26379',
      REDIS_SENTINEL_NAME: 'm',
    });
    expect(secretsOf(config)).toEqual(expect.arrayContaining(['p@ssword1', 'p%40ssword1', 'sentinel-pw']));
  });

  it.each([
    [{ REDIS_URL: 'http://h:6379' }, /^REDIS_URL: must start with redis:\/\/ or rediss:\/\//],
    [{ REDIS_URL: 'redis://a:1,rediss://b:2' }, /^REDIS_URL: mixes redis:\/\/ and rediss:\/\//],
    [{ REDIS_URL: 'redis://:x@a:1,redis://:y@b:2' }, /^REDIS_URL: the entries give different passwords/],
    [{ REDIS_URL: 'redis://a:1,b:2', REDIS_CLUSTER: 'false' }, /^REDIS_URL: several nodes are listed/],
    [
      { REDIS_URL: 'redis://a/3', REDIS_CLUSTER: 'true', QUEUE_PREFIX: '{q}' },
      /^REDIS_URL: a Redis Cluster has only database 0/,
    ],
    [{ REDIS_URL: 'redis://a/db' }, /^REDIS_URL: the path must be a database number/],
    [{ REDIS_URL: 'a:99999' }, /^REDIS_URL: port out of range/],
    [{ REDIS_URL: ' , ' }, /^REDIS_URL: empty/],
    [{ REDIS_CLUSTER: 'yes' }, /^REDIS_CLUSTER: must be true or false/],
    [{ REDIS_SENTINELS: 's:26379' }, /^REDIS_SENTINEL_NAME: required with REDIS_SENTINELS/],
    [{ REDIS_SENTINEL_NAME: 'm' }, /^REDIS_SENTINEL_NAME: set REDIS_SENTINELS too/],
    [
      { REDIS_SENTINELS: 's', REDIS_SENTINEL_NAME: 'm', REDIS_URL: 'redis://a,redis://b' },
      /^REDIS_URL: with REDIS_SENTINELS give one URL/,
    ],
    [
      { REDIS_SENTINELS: 's', REDIS_SENTINEL_NAME: 'm', REDIS_CLUSTER: 'true', QUEUE_PREFIX: '{q}' },
      /^REDIS_CLUSTER: a Sentinel setup is not a cluster/,
    ],
  ])('%j is exit 2: %s', (env, message) => {
    expect(configError(env).message).toMatch(message);
  });

  it('names the variable, never a password, in its messages', () => {
    const err = configError({ REDIS_URL: 'redis://:hunter2secret@a:1,redis://:other2secret@b:2' });
    expect(err.message).not.toMatch(/hunter2secret|other2secret/);
  });

  it('REDIS_CLUSTER=true with a prefix without a hash tag is exit 2 at start, giving the fix', () => {
    const err = configError({ REDIS_CLUSTER: 'true', QUEUE_PREFIX: 'jobs' });
    expect(err.code).toBe('REDIS_NO_HASH_TAG');
    expect(err.message).toMatch(/^QUEUE_PREFIX: .*no hash tag.*set QUEUE_PREFIX=\{jobs\}/);
    expect(loadConfig({ REDIS_CLUSTER: 'true', QUEUE_PREFIX: 'app-{jobs}' }).redis.cluster).toBe(true);
  });

  it('finds a hash tag as Redis Cluster does: the first {…} that is not empty', () => {
    expect(hashTagOf('{feedsync}')).toBe('feedsync');
    expect(hashTagOf('app:{q}:x')).toBe('q');
    expect(hashTagOf('bull')).toBeNull();
    expect(hashTagOf('{}x')).toBeNull();
    expect(hashTagOf('{open')).toBeNull();
  });
});
