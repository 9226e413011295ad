import { describe, expect, it } from 'vitest';
import { configForSource, loadConfig } from '../../src/config/config.js';
import { ConfigError } from '../../src/errors.js';

const KEY = 'svc_live_acme_0123456789';

function refusal(env: Record<string, string>, files: Record<string, string> = {}): ConfigError {
  try {
    loadConfig(env, (p) => {
      const text = files[p];
      if (text === undefined) throw Object.assign(new Error('missing'), { code: 'ENOENT' });
      return text;
    });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).exitCode).toBe(2);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

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
    expect(refusal({ [name]: value }).message).toMatch(new RegExp(`^${name}: must be`));
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
      K: KEY,
      FEED_MAX_REQUESTS_PER_SECOND: '7',
    };
    const config = loadConfig(env, () => file);
    const of = (s: string) => configForSource(config, s).feed;
    expect([of('hot').rateShare, of('hot').maxRequestsPerSecond]).toEqual([0.2, 3]);
    expect([of('plain').rateShare, of('plain').maxRequestsPerSecond]).toEqual([0.5, 7]);
    expect(of('uncapped').maxRequestsPerSecond).toBeNull();
    expect(
      refusal(
        { ...env, FEED_SOURCES_FILE: '/bad.json' },
        { '/bad.json': JSON.stringify({ sources: [{ source: 'hot', api_key_env: 'K', rate_share: 2 }] }) },
      ).message,
    ).toContain('sources[0] ("hot"): rate_share: must be a number above 0 and at most 1');
  });
});
