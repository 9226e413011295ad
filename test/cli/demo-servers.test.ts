import { type AddressInfo, createServer, type Socket } from 'node:net';
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
      why: expect.stringMatching(
        new RegExp(
          `^none answers at ${new URL(closed).host} and DATABASE_URL is unset; the queues in it too \\(QUEUE_BACKEND=postgres`,
        ),
      ),
    });
  });
});

describe('postgresAnswers', () => {
  it('says a Postgres answers, even one that refuses the login, and nothing where nothing listens', async () => {
    expect(await postgresAnswers(TEST_DATABASE_URL)).toBe('postgres');
    const refused = new URL(TEST_DATABASE_URL);
    refused.username = 'no_such_role_here';
    expect(await postgresAnswers(refused.toString())).toBe('postgres');
    expect(await postgresAnswers(`postgres://postgres@127.0.0.1:${await freePort()}/postgres`)).toBe(
      'nothing',
    );
  });

  it('names something that is not Postgres on the port, and the demo starts its own rather than blame Redis', async () => {
    // A web server on the port: it answers the start-up message with HTTP and hangs up.
    const sockets = new Set<Socket>();
    const server = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.end('HTTP/1.1 400 Bad Request\r\n\r\n');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    try {
      const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
      const answer = await postgresAnswers(url);
      expect(answer).toEqual({ other: expect.any(String) });
      const config = testConfig(names);
      const servers = await chooseDemoServers({
        ...config,
        database: { ...config.database, url },
        given: config.given.filter((n) => n !== 'DATABASE_URL'),
      });
      expect(servers).toMatchObject({ databaseUrl: null });
      // The queues go into the demo's own Postgres too (the assertion queueBackend: 'postgres' made before).
      expect(servers.why).toMatch(
        new RegExp(
          `^something that is not Postgres answers \\(.+\\) at 127\\.0\\.0\\.1:${port} .*the queues in it too \\(QUEUE_BACKEND=postgres`,
        ),
      );
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
