import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testEnv } from '../support/config.js';
import { CLI, killChildren, runCli, spawnNode } from '../support/processes.js';
import { TEST_REDIS_URL } from '../support/redis.js';

// Every command that opens a Postgres pool, with DATABASE_URL where nothing answers or
// where Redis does: each ends on its own within DATABASE_CONNECT_TIMEOUT_MS (plus the
// start of a node process on a busy machine), exit 1, one line naming DATABASE_URL and
// the address, never the password.

const TIMEOUT_MS = 1_000;
/** Generous: a node process starts in seconds on a loaded machine; without the deadline these never end. */
const BOUND_MS = 20_000;
const PASSWORD = 'pg-pw-never-shown';
const COMMANDS = [
  ['migrate'],
  ['status'],
  ['sync', '--once'],
  ['serve-webhooks'],
  ['cursor', 'show'],
  ['reconcile'],
  ['requeue', '--since', '1h'],
] as const;

/** A TCP server that accepts and never answers. */
let silent: Server;
let silentPort: number;
const sockets = new Set<Socket>();
/** Connections the silent server has accepted so far. */
let accepted = 0;

beforeAll(async () => {
  silent = createServer((socket) => {
    sockets.add(socket);
    accepted++;
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  silentPort = (silent.address() as { port: number }).port;
});
afterAll(async () => {
  await killChildren();
  for (const s of sockets) s.destroy();
  await new Promise<void>((resolve) => silent.close(() => resolve()));
});

function envAt(hostPort: string): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    ...testEnv({
      schema: 'pg_deadline_unused',
      prefix: 'pg-deadline-unused',
      baseUrl: 'http://127.0.0.1:9/api',
    }),
    DATABASE_URL: `postgres://postgres:${PASSWORD}@${hostPort}/postgres`,
    DATABASE_CONNECT_TIMEOUT_MS: String(TIMEOUT_MS),
    WEBHOOK_SECRET: 'whsec_deadline_test',
    WEBHOOK_PORT: '0',
    LOG_LEVEL: 'info',
  };
}

describe('DATABASE_URL at an address where no Postgres answers', () => {
  for (const [what, at] of [
    ['a silent port', () => `127.0.0.1:${silentPort}`],
    ['the Redis port', () => new URL(TEST_REDIS_URL).host],
  ] as const) {
    it(`every command ends within the connect timeout: ${what}`, async () => {
      const hostPort = at();
      // Two at a time: bounds, not speed, and the machine is shared.
      const results: { args: readonly string[]; ms: number; res: Awaited<ReturnType<typeof runCli>> }[] = [];
      for (let i = 0; i < COMMANDS.length; i += 2) {
        results.push(
          ...(await Promise.all(
            COMMANDS.slice(i, i + 2).map(async (args) => {
              const started = performance.now();
              const res = await runCli(args, envAt(hostPort), BOUND_MS + 10_000);
              return { args, ms: performance.now() - started, res };
            }),
          )),
        );
      }
      for (const { args, ms, res } of results) {
        const name = args.join(' ');
        expect(res.code, `${name}: ${res.stderr}`).toBe(1);
        expect(ms, name).toBeLessThan(BOUND_MS);
        // status's stdout is its report: the wait is said on stderr, never inside the report.
        if (name === 'status') expect(res.stdout, name).toBe('');
        // Before the deadline, the wait is said (a log line: on stderr for migrate, whose stdout is its answer).
        expect(`${res.stdout}${res.stderr}`, name).toContain(
          `waiting for Postgres at ${hostPort} (DATABASE_URL) to answer; giving up after ${TIMEOUT_MS} ms`,
        );
        const lines = res.stderr
          .trim()
          .split('\n')
          .filter((l) => !l.startsWith('{'));
        expect(lines, `${name}: ${res.stderr}`).toHaveLength(1);
        expect(lines[0], name).toBe(
          `feedsync: Postgres at ${hostPort} (DATABASE_URL) did not answer within ${TIMEOUT_MS} ms ` +
            '(DATABASE_CONNECT_TIMEOUT_MS): check that DATABASE_URL names a Postgres server, its host and port, ' +
            'and that the server runs',
        );
        expect(`${res.stdout}${res.stderr}`, name).not.toContain(PASSWORD);
      }
    }, 200_000);
  }

  it('one SIGTERM is enough for sync --once and serve-webhooks while they wait to connect', async () => {
    // A longer deadline, so that the signal arrives during the wait.
    const env = { ...envAt(`127.0.0.1:${silentPort}`), DATABASE_CONNECT_TIMEOUT_MS: '4000' };
    const before = accepted;
    const children = [spawnNode([CLI, 'sync', '--once'], env), spawnNode([CLI, 'serve-webhooks'], env)];
    // Signalled once the wait has begun: the silent server holds their connections.
    const deadline = performance.now() + BOUND_MS;
    while (accepted < before + 2 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(accepted).toBeGreaterThanOrEqual(before + 2);
    for (const child of children) child.signal('SIGTERM');
    for (const child of children) {
      const res = await child.waitExit(BOUND_MS);
      expect(res.code, res.stderr).toBe(1);
      expect(res.stderr).toContain('(DATABASE_URL) did not answer within 4000 ms');
    }
  }, 60_000);
});
