import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { secretsOf } from '../../src/config/secrets.js';
import { configForSource } from '../../src/config/source-config.js';
import { ConfigError } from '../../src/errors.js';

const KEY_A = 'svc_live_acme_0123456789';
const KEY_B = 'svc_live_globex_9876543210';
const files: Record<string, string> = {
  '/keys/acme': `${KEY_A}\n`,
  '/keys/empty': '\n',
};
const readFile = (p: string): string => {
  const text = files[p];
  if (text === undefined) throw Object.assign(new Error('missing'), { code: 'ENOENT' });
  return text;
};

/** The config of a sources file holding `doc` (an object is written as JSON, a string as it is). */
function load(doc: unknown, env: Record<string, string> = {}) {
  files['/etc/sources.json'] = typeof doc === 'string' ? doc : JSON.stringify(doc);
  return loadConfig({ FEED_SOURCES_FILE: '/etc/sources.json', ...env }, readFile);
}

function refusal(doc: unknown, env: Record<string, string> = {}): string {
  try {
    load(doc, env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).exitCode).toBe(2);
    return (err as ConfigError).message;
  }
  throw new Error('expected a ConfigError');
}

const ACME = { source: 'acme', api_key_file: '/keys/acme', base_url: 'https://acme.example/api' };

describe('FEED_SOURCES_FILE', () => {
  it('leaves the key files unread for a command that never calls the service (keys: false)', () => {
    files['/etc/sources.json'] = JSON.stringify({
      sources: [ACME, { ...ACME, source: 'gone', api_key_file: '/keys/missing' }],
    });
    const read: string[] = [];
    const c = loadConfig(
      { FEED_SOURCES_FILE: '/etc/sources.json' },
      (p) => {
        read.push(p);
        return readFile(p);
      },
      { keys: false },
    );
    expect(read).toEqual(['/etc/sources.json']);
    expect(c.sources.map((s) => [s.source, s.apiKey, s.keyProblem])).toEqual([
      ['acme', null, null],
      ['gone', null, null],
    ]);
    // Every other check of the file still holds.
    expect(() =>
      loadConfig(
        { FEED_SOURCES_FILE: '/etc/sources.json' },
        (p) =>
          p === '/etc/sources.json'
            ? JSON.stringify({ sources: [{ ...ACME, api_key_file: '' }] })
            : readFile(p),
        { keys: false },
      ),
    ).toThrow(/api_key_file: must be a path/);
  });

  it('reads every source, with FEED_BASE_URL, FEED_API_KEY and FEED_TYPES as defaults', () => {
    const c = load(
      {
        sources: [
          ACME,
          { source: 'globex', api_key_env: 'GLOBEX_KEY', types: ['email.bounced', 'email.complained'] },
          { source: 'initech' },
        ],
      },
      {
        GLOBEX_KEY: KEY_B,
        FEED_API_KEY: 'svc_live_shared_key',
        FEED_BASE_URL: 'https://feed.example/api/',
        FEED_TYPES: 'email.delivered',
      },
    );
    expect(c.sourcesFile).toBe('/etc/sources.json');
    expect(c.sources).toEqual([
      {
        source: 'acme',
        baseUrl: 'https://acme.example/api',
        apiKey: KEY_A,
        keyProblem: null,
        types: ['email.delivered'],
      },
      {
        source: 'globex',
        baseUrl: 'https://feed.example/api',
        apiKey: KEY_B,
        keyProblem: null,
        types: ['email.bounced', 'email.complained'],
      },
      {
        source: 'initech',
        baseUrl: 'https://feed.example/api',
        apiKey: 'svc_live_shared_key',
        keyProblem: null,
        types: ['email.delivered'],
      },
    ]);
    expect(Object.isFrozen(c.sources[0])).toBe(true);
    // Every key is scrubbed by the logger, as FEED_API_KEY is.
    expect(secretsOf(c)).toEqual(expect.arrayContaining([KEY_A, KEY_B, 'svc_live_shared_key']));
  });

  it('without the file, the one source of FEED_*; SYNC_CONCURRENCY defaults to 4', () => {
    const c = loadConfig(
      { FEED_SOURCE: 'solo', FEED_API_KEY: KEY_A, FEED_BASE_URL: 'http://127.0.0.1:1/api' },
      readFile,
    );
    expect(c.sourcesFile).toBeNull();
    expect(c.sources).toEqual([
      { source: 'solo', baseUrl: 'http://127.0.0.1:1/api', apiKey: KEY_A, keyProblem: null, types: null },
    ]);
    expect(c.syncConcurrency).toBe(4);
    expect(loadConfig({ HOSTNAME: 'pod-7' }, readFile).hostName).toBe('pod-7');
  });

  it("configForSource gives the one-source run that source's URL, key and types", () => {
    const c = load(
      { sources: [ACME, { source: 'globex', api_key_env: 'GLOBEX_KEY', types: ['email.sent'] }] },
      {
        GLOBEX_KEY: KEY_B,
        FEED_BASE_URL: 'https://feed.example/api',
      },
    );
    expect(configForSource(c, 'globex').feed).toMatchObject({
      source: 'globex',
      baseUrl: 'https://feed.example/api',
      apiKey: KEY_B,
      types: ['email.sent'],
    });
    expect(configForSource(c, 'acme').feed).toMatchObject({ source: 'acme', apiKey: KEY_A, types: null });
    expect(() => configForSource(c, 'nobody')).toThrow(
      /source "nobody" is not in FEED_SOURCES_FILE \(acme, globex\); give --source one of them$/,
    );
    // A typo names the near entry.
    expect(() => configForSource(c, 'globx')).toThrow(
      'source "globx" is not in FEED_SOURCES_FILE (acme, globex); did you mean "globex"?',
    );
    // Without a file, any name reads with FEED_*, as before.
    const solo = loadConfig({ FEED_API_KEY: KEY_A }, readFile);
    expect(configForSource(solo, 'other').feed).toMatchObject({ source: 'other', apiKey: KEY_A });
  });

  it.each([
    ['a file that cannot be read', null, /sources\.json: cannot be read \(ENOENT\)/],
    ['not JSON', '{"sources": [', /is not JSON/],
    // V8 quotes the text it could not read; the one line quotes none of it.
    ['not JSON, over lines', '{"sources": [\n x\n]}', /is not JSON \(Unexpected token 'x'\)$/],
    [
      'not JSON, at a position',
      '{"sources": [\n {"source": "a",}\n]}',
      /is not JSON \(Expected double-quoted property name in JSON at position 30\b.*line 2,? column 17\)$/,
    ],
    ['no sources list', { source: 'acme' }, /must be an object \{"sources": \[\.\.\.\]\}/],
    ['an unknown top-level field', { sources: [ACME], extra: 1 }, /unknown field "extra" at the top level/],
    ['an empty list', { sources: [] }, /"sources" is empty/],
    ['an entry that is not an object', { sources: ['acme'] }, /sources\[0\]: entry: must be an object/],
    [
      'a missing source',
      { sources: [ACME, { api_key_file: '/keys/acme' }] },
      /sources\[1\]: source: is required/,
    ],
    [
      'a source with spaces',
      { sources: [{ ...ACME, source: 'a b' }] },
      /sources\[0\]: source: must be 1 to 200/,
    ],
    [
      'a duplicate source',
      { sources: [ACME, ACME] },
      /sources\[1\] \("acme"\): source: duplicate of sources\[0\]/,
    ],
    [
      'an unknown field',
      { sources: [{ ...ACME, apikey: 'x' }] },
      /sources\[0\] \("acme"\): apikey: unknown field/,
    ],
    [
      'a source with a NUL',
      { sources: [{ ...ACME, source: 'acme\u0000x' }] },
      /sources\[0\]: source: must not hold a control character/,
    ],
    [
      'a source with a control character',
      { sources: [{ ...ACME, source: 'acme\u001b[31m' }] },
      /sources\[0\]: source: must not hold a control character/,
    ],
    [
      'a source with a lone surrogate',
      { sources: [{ ...ACME, source: 'acme\ud800' }] },
      /sources\[0\]: source: must not hold a lone UTF-16 surrogate/,
    ],
    [
      'a source that is not a string',
      { sources: [{ ...ACME, source: 7 }] },
      /sources\[0\]: source: must be a string/,
    ],
    [
      'both key fields',
      { sources: [{ ...ACME, api_key_env: 'X' }] },
      /api_key_file: set either api_key_file or api_key_env, not both/,
    ],
    [
      'an unset key variable',
      { sources: [{ source: 'acme', base_url: ACME.base_url, api_key_env: 'NOPE_KEY' }] },
      /\("acme"\): api_key_env: the variable is unset or empty/,
    ],
    ['no key at all', { sources: [{ source: 'acme', base_url: ACME.base_url }] }, /api_key_file: no key/],
    [
      'a bad base_url',
      { sources: [{ ...ACME, base_url: 'http://feed.example/api' }] },
      /\("acme"\): base_url: http:\/\/ is only allowed to a loopback host/,
    ],
    [
      'a base_url not ending in /api',
      { sources: [{ ...ACME, base_url: 'https://feed.example/' }] },
      /base_url: must end in \/api/,
    ],
    [
      'no base_url and no FEED_BASE_URL',
      { sources: [{ source: 'acme', api_key_file: '/keys/acme' }] },
      /\("acme"\): base_url: required when FEED_BASE_URL is unset/,
    ],
    [
      'types not a list',
      { sources: [{ ...ACME, types: 'email.sent' }] },
      /\("acme"\): types: must be a non-empty list/,
    ],
    ['an empty types list', { sources: [{ ...ACME, types: [] }] }, /types: must be a non-empty list/],
    [
      'a malformed type',
      { sources: [{ ...ACME, types: ['email.sent', 'bounced'] }] },
      /\("acme"\): types: "bounced" is not a full type name/,
    ],
  ])('refuses %s, naming the entry and the field', (_what, doc, message) => {
    if (doc === null) {
      delete files['/etc/sources.json'];
      expect(() => loadConfig({ FEED_SOURCES_FILE: '/etc/sources.json' }, readFile)).toThrow(message);
      return;
    }
    const text = refusal(doc);
    expect(text).toMatch(/^FEED_SOURCES_FILE \/etc\/sources\.json: /);
    expect(text).toMatch(message);
  });

  it.each([
    ['missing', '/keys/nope', 'api_key_file cannot be read (ENOENT)'],
    ['empty', '/keys/empty', 'api_key_file: the file is empty'],
  ])(
    "a key file %s is that source's problem alone: the file loads, the source carries why",
    (_what, path, why) => {
      const c = load({ sources: [ACME, { ...ACME, source: 'broken', api_key_file: path }] });
      expect(c.sources.map((s) => [s.source, s.apiKey, s.keyProblem])).toEqual([
        ['acme', KEY_A, null],
        ['broken', null, why],
      ]);
    },
  );

  it('refuses a FEED_SOURCE or a --source name that a metric label or Postgres cannot carry', () => {
    expect(() => loadConfig({ FEED_SOURCE: 'a\u0001b' }, readFile)).toThrow(
      /FEED_SOURCE: must not hold a control character/,
    );
    // A space is fine outside a file: Postgres, a label and a job id carry it.
    expect(loadConfig({ FEED_SOURCE: "it's mine" }, readFile).feed.source).toBe("it's mine");
    const c = loadConfig({ FEED_SOURCE: 'solo' }, readFile);
    expect(() => configForSource(c, 'x\ud800')).toThrow(ConfigError);
  });

  it('never puts a key into its messages', () => {
    const text = refusal(
      { sources: [{ source: 'acme', base_url: 'nope', api_key_env: 'ACME_KEY' }] },
      { ACME_KEY: KEY_A },
    );
    expect(text).not.toContain(KEY_A);
    // A key pasted into a field that names where the key is: the problem names the field only.
    expect(JSON.stringify(load({ sources: [{ ...ACME, api_key_file: KEY_A }] }).sources)).not.toContain(
      KEY_A,
    );
    expect(refusal({ sources: [{ ...ACME, api_key_file: undefined, api_key_env: KEY_A }] })).not.toContain(
      KEY_A,
    );
  });

  it('refuses a SYNC_CONCURRENCY outside 1..256', () => {
    expect(() => loadConfig({ SYNC_CONCURRENCY: '0' }, readFile)).toThrow(/SYNC_CONCURRENCY/);
    expect(loadConfig({ SYNC_CONCURRENCY: '10' }, readFile).syncConcurrency).toBe(10);
  });
});
