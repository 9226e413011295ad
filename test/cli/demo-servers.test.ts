import { describe, expect, it } from 'vitest';
import { chooseDemoServers, postgresAnswers } from '../../src/cli/demo-servers.js';
import { testConfig } from '../support/config.js';
import { TEST_DATABASE_URL } from '../support/postgres.js';
import { freePort } from '../support/processes.js';

const names = { schema: 'demo_servers', prefix: 'demo-servers' };

describe('chooseDemoServers', () => {
  it('takes the Postgres DATABASE_URL names, without asking whether it answers', async () => {
    const config = testConfig(names);
    const servers = await chooseDemoServers(config, async () => {
      throw new Error('not asked');
    });
    expect(servers).toEqual({
      databaseUrl: TEST_DATABASE_URL,
      queueBackend: 'redis',
      why: `DATABASE_URL names it; the queues in the Redis at ${new URL(config.redis.url).host}`,
    });
  });

  it('without DATABASE_URL, takes the default address when a Postgres answers there, else starts its own', async () => {
    const closed = `postgres://postgres@127.0.0.1:${await freePort()}/postgres`;
    const unset = (url: string) => {
      const config = testConfig(names);
      return {
        ...config,
        database: { ...config.database, url },
        given: config.given.filter((n) => n !== 'DATABASE_URL'),
      };
    };
    expect(await chooseDemoServers(unset(TEST_DATABASE_URL))).toMatchObject({
      databaseUrl: TEST_DATABASE_URL,
      why: expect.stringMatching(/^it answers at the default address; /),
    });
    // Its own Postgres holds the queues too: nothing but Node is needed.
    expect(await chooseDemoServers(unset(closed))).toMatchObject({
      databaseUrl: null,
      queueBackend: 'postgres',
      why: expect.stringMatching(
        new RegExp(`^none answers at ${new URL(closed).host} and DATABASE_URL is unset; `),
      ),
    });
  });
});

describe('postgresAnswers', () => {
  it('is true where a Postgres answers, even one that refuses the login, and false where nothing listens', async () => {
    expect(await postgresAnswers(TEST_DATABASE_URL)).toBe(true);
    const refused = new URL(TEST_DATABASE_URL);
    refused.username = 'no_such_role_here';
    expect(await postgresAnswers(refused.toString())).toBe(true);
    expect(await postgresAnswers(`postgres://postgres@127.0.0.1:${await freePort()}/postgres`)).toBe(false);
  });
});
