import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { VARIABLES } from '../../src/config/fields.js';
import { unknownVariables } from '../../src/config/unknown-variables.js';

describe('variables of feedsync families that feedsync does not read', () => {
  it('warns of a misspelt name with the closest known one', () => {
    expect(
      unknownVariables({ QUEUE_PREFX: 'foo', DATABSE_SCHEMA: 'x', WEBHOOK_SECRETS: 's' }, VARIABLES),
    ).toEqual([
      'DATABSE_SCHEMA is not a variable feedsync reads, so it is ignored; did you mean DATABASE_SCHEMA?',
      'QUEUE_PREFX is not a variable feedsync reads, so it is ignored; did you mean QUEUE_PREFIX?',
      'WEBHOOK_SECRETS is not a variable feedsync reads, so it is ignored; did you mean WEBHOOK_SECRET?',
    ]);
  });

  it('warns of a near miss of a known name outside its families too', () => {
    expect(
      unknownVariables({ JOBS_ATTEMPTS: '3', LOGS_LEVEL: 'debug', SYNCS_CONCURENCY: '2' }, VARIABLES),
    ).toEqual([
      'JOBS_ATTEMPTS is not a variable feedsync reads, so it is ignored; did you mean JOB_ATTEMPTS?',
      'LOGS_LEVEL is not a variable feedsync reads, so it is ignored; did you mean LOG_LEVEL?',
      'SYNCS_CONCURENCY is not a variable feedsync reads, so it is ignored; did you mean SYNC_CONCURRENCY?',
    ]);
  });

  it('knows every variable the config reads, _FILE variants included, from the config itself', () => {
    const env = Object.fromEntries(VARIABLES.map((n) => [n, 'x']));
    expect(unknownVariables(env, VARIABLES)).toEqual([]);
    expect(VARIABLES).toContain('FEED_API_KEY_FILE');
    expect(VARIABLES).toContain('REDIS_WAIT_REPLICAS');
  });

  it('leaves other programs’ variables alone, and a key named by a sources file', () => {
    const env = {
      PATH: '/bin',
      NODE_OPTIONS: '-r x',
      PGHOST: 'db',
      LC_ALL: 'C',
      // Two letters off LOG_LEVEL, and short: another program's.
      NO_LEVEL: '1',
      JAVA_OPTS: '-Xmx1g',
      FEED_API_KEY_ACME: 'k_acme',
    };
    expect(unknownVariables(env, VARIABLES, ['k_acme'])).toEqual([]);
    expect(unknownVariables({ FEED_API_KEY_ACME: 'other' }, VARIABLES, ['k_acme'])).toHaveLength(1);
  });

  it('names no variable when none is near', () => {
    expect(unknownVariables({ REDIS_SOMETHING_ELSE_ENTIRELY: '1' }, VARIABLES)).toEqual([
      'REDIS_SOMETHING_ELSE_ENTIRELY is not a variable feedsync reads, so it is ignored (docs/DEPLOYMENT.md lists them, under Configuration)',
    ]);
  });
});

describe('loadConfig', () => {
  it('warns of them through warn, once per process however often it loads', () => {
    const warned: string[] = [];
    const env = { QUEUE_PERFIX: 'x', LOG_LEVLE: 'debug' };
    loadConfig(env, undefined, { warn: (w) => warned.push(w) });
    loadConfig(env, undefined, { warn: (w) => warned.push(w) });
    expect(warned).toEqual(unknownVariables(env, VARIABLES));
    expect(warned).toHaveLength(2);
  });

  it('warns as a process warning when no warn is given', async () => {
    const seen = new Promise<Error & { code?: string }>((resolve) => process.once('warning', resolve));
    loadConfig({ REDIS_ULR: 'redis://127.0.0.1:6379' });
    expect(await seen).toMatchObject({
      code: 'FEEDSYNC_UNKNOWN_VARIABLE',
      message: 'REDIS_ULR is not a variable feedsync reads, so it is ignored; did you mean REDIS_URL?',
    });
  });
});
