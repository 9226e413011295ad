import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StatusReport } from '../../src/cli/status-report.js';
import { testEnv } from '../support/config.js';
import { freePort, killChildren, runCli } from '../support/processes.js';
import { startTestSimulator, TEST_API_KEY, useSimulator } from '../support/simulator.js';
import { useSandboxes } from '../sync/harness.js';

const sim = useSimulator({ backlog: 30 });
const sandbox = useSandboxes();
const PATH = process.env.PATH ?? '';
/** A port held by this test, so that a listen on it fails with EADDRINUSE. */
let held: Server;
let heldPort: number;

beforeAll(async () => {
  held = createServer();
  await new Promise<void>((resolve) => held.listen(0, '0.0.0.0', resolve));
  heldPort = (held.address() as { port: number }).port;
});
afterAll(async () => {
  await killChildren();
  await new Promise<void>((resolve) => held.close(() => resolve()));
});

/** One line on stderr, and no stack trace anywhere. */
function expectOneLine(res: { stdout: string; stderr: string }): string {
  const lines = res.stderr.trim().split('\n');
  expect(lines, res.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(/^feedsync: /);
  expect(`${res.stdout}${res.stderr}`).not.toMatch(/\n\s+at |"stack"/);
  expect(`${res.stdout}${res.stderr}`).not.toContain(TEST_API_KEY);
  return lines[0]!;
}

describe('expected failures: one line on stderr that says what failed and what to do, no stack', () => {
  it('a rejected key (exit 3)', async () => {
    const strict = await startTestSimulator({ keyPrefix: 'acme' });
    try {
      const res = await runCli(['webhooks', 'list'], {
        PATH,
        ...testEnv({ schema: 'unused', prefix: 'unused', baseUrl: strict.baseUrl }),
        LOG_LEVEL: 'info',
      });
      expect(res.code).toBe(3);
      expect(expectOneLine(res)).toContain('rejected the API key (HTTP 401): check FEED_API_KEY');
    } finally {
      await strict.close();
    }
  });

  it('an unknown webhook id (exit 1), naming the command that lists them', async () => {
    const env = { PATH, ...testEnv({ schema: 'unused', prefix: 'unused', baseUrl: sim().baseUrl }) };
    const res = await runCli(['webhooks', 'delete', 'wh_nope'], { ...env, LOG_LEVEL: 'info' });
    expect(res.code).toBe(1);
    expect(expectOneLine(res)).toBe(
      'feedsync: no webhook registration with id wh_nope (HTTP 404); "feedsync webhooks list" shows the ids',
    );
  });

  it('Postgres at a closed port names Postgres and DATABASE_URL; the stack shows at LOG_LEVEL=debug only', async () => {
    const port = await freePort();
    const env = {
      PATH,
      ...testEnv({ schema: 'unused', prefix: 'unused' }),
      DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/test`,
    };
    const res = await runCli(['status'], { ...env, LOG_LEVEL: 'info' });
    expect(res.code).toBe(1);
    expect(expectOneLine(res)).toBe(
      `feedsync: cannot reach Postgres at 127.0.0.1:${port} (ECONNREFUSED): check DATABASE_URL and that the server runs`,
    );
    const debug = await runCli(['status'], { ...env, LOG_LEVEL: 'debug' });
    expect(debug.code).toBe(1);
    // status writes its log lines to stderr, so that its report on stdout is whole.
    expect(debug.stderr).toContain('"stack":"Error: connect ECONNREFUSED');
  });

  it('Redis at a closed port names Redis and REDIS_URL; the events are stored', async () => {
    const box = await sandbox('cli_redis_down');
    const port = await freePort();
    const res = await runCli(['sync', '--once'], {
      PATH,
      ...testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl }),
      REDIS_URL: `redis://127.0.0.1:${port}`,
      LOG_LEVEL: 'info',
    });
    expect(res.code).toBe(1);
    expect(expectOneLine(res)).toContain(`Redis (REDIS_URL, 127.0.0.1:${port}) did not take their jobs`);
    const { rows } = await box.store.pool.query(`SELECT count(*)::int AS n FROM "${box.schema}".events`);
    expect(rows[0]).toEqual({ n: 30 });
    // The turn stored its events (a turn does not wait for its jobs): status shows them
    // waiting in the outbox, not a failed turn with an unknown error.
    const status = await runCli(['status', '--json'], {
      PATH,
      ...testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl }),
    });
    const report = JSON.parse(status.stdout) as StatusReport;
    expect(report.sources[0]).toMatchObject({ failuresInRow: 0, lastError: null });
    expect(report.sources[0]?.outboxBacklog).toBeGreaterThan(0);
    // The run gives Redis its five tries first (about 13 s), then status runs.
  }, 60_000);

  it('METRICS_PORT and WEBHOOK_PORT in use name the variable', async () => {
    const box = await sandbox('cli_port');
    const env = { PATH, ...testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl }) };
    const [watch, receiver] = await Promise.all([
      runCli(['sync', '--watch'], { ...env, METRICS_PORT: String(heldPort), LOG_LEVEL: 'info' }),
      runCli(['serve-webhooks'], {
        ...env,
        WEBHOOK_PORT: String(heldPort),
        WEBHOOK_SECRET: 'whsec_cli_failures',
        LOG_LEVEL: 'info',
      }),
    ]);
    expect(watch.code).toBe(1);
    expect(expectOneLine(watch)).toContain(`METRICS_PORT ${heldPort} is already in use`);
    expect(receiver.code).toBe(1);
    expect(expectOneLine(receiver)).toContain(`WEBHOOK_PORT ${heldPort} is already in use`);
  });

  it('METRICS_PORT equal to WEBHOOK_PORT names both settings (exit 2), before listening on either', async () => {
    const box = await sandbox('cli_port_clash');
    const port = String(await freePort());
    const res = await runCli(['serve-webhooks'], {
      PATH,
      ...testEnv({ schema: box.schema, prefix: box.prefix }),
      WEBHOOK_SECRET: 'whsec_cli_failures',
      WEBHOOK_PORT: port,
      METRICS_PORT: port,
    });
    expect(res.code).toBe(2);
    expect(expectOneLine(res)).toBe(
      `feedsync: METRICS_PORT and WEBHOOK_PORT are both ${port}: serve-webhooks listens on each, so they must differ; change one of them`,
    );
  });

  it('METRICS_HOST that is not an address of this machine is a configuration error (exit 2)', async () => {
    const box = await sandbox('cli_host');
    const res = await runCli(['sync', '--watch'], {
      PATH,
      ...testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl }),
      METRICS_HOST: '192.0.2.1',
      METRICS_PORT: '0',
    });
    expect(res.code).toBe(2);
    expect(expectOneLine(res)).toContain('METRICS_HOST 192.0.2.1 is not an address of this machine');
  });

  it('a feed at a closed port logs each retry at info with its wait and cause, then names host and port', async () => {
    const box = await sandbox('cli_feed_down');
    const port = await freePort();
    const res = await runCli(['sync', '--once'], {
      PATH,
      ...testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: `http://127.0.0.1:${port}/api` }),
      FEED_MAX_RETRIES: '2',
      LOG_LEVEL: 'info',
    });
    expect(res.code).toBe(1);
    const retries = res.stdout
      .trim()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { level: number; msg: string; waitMs?: number })
      .filter((l) => l.waitMs !== undefined);
    expect(retries.map((l) => [l.level, l.msg.replace(/in \d+\.\d s$/, 'in … s')])).toEqual([
      [30, `GET /events: cannot reach 127.0.0.1:${port} (ECONNREFUSED); retry 1 of 2 in … s`],
      [30, `GET /events: cannot reach 127.0.0.1:${port} (ECONNREFUSED); retry 2 of 2 in … s`],
    ]);
    expect(expectOneLine(res)).toBe(
      `feedsync: GET /events: cannot reach 127.0.0.1:${port} (ECONNREFUSED): check FEED_BASE_URL and that the service is up (retries are logged at info)`,
    );
  });

  it('a bad %-escape in a password is exit 2 naming the variable', async () => {
    const res = await runCli(['status'], {
      PATH,
      DATABASE_URL: 'postgres://postgres:100%@127.0.0.1:5432/test',
    });
    expect(res.code).toBe(2);
    expect(expectOneLine(res)).toBe(
      'feedsync: DATABASE_URL: the password holds a bad %-escape (write a literal % as %25)',
    );
  });
});
