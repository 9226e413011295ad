import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setCursor } from '../../src/store/cursor.js';
import { testEnv } from '../support/config.js';
import { freePort, killChildren, runCli } from '../support/processes.js';
import { useSimulator } from '../support/simulator.js';
import { useSandboxes } from '../sync/harness.js';

const sim = useSimulator({ backlog: 5 });
const sandbox = useSandboxes();
const PATH = process.env.PATH ?? '';
afterAll(killChildren);

/** Parsed JSON log lines of a run's stdout. */
function logLines(stdout: string): { msg: string; waitMs?: number }[] {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg: string; waitMs?: number });
}

describe('errors that say what to do', () => {
  it('a cursor the feed no longer knows: exit 2 (not transient), not retried, the fix named', async () => {
    const box = await sandbox('cli_lost_cursor');
    await setCursor(box.store, 'acme', 'evt_999999999999');
    const res = await runCli(['sync', '--once'], {
      PATH,
      ...testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl }),
      FEED_SOURCE: 'acme',
      LOG_LEVEL: 'info',
    });
    expect(res.code).toBe(2);
    expect(logLines(res.stdout).filter((l) => l.waitMs !== undefined)).toEqual([]);
    const line = res.stderr.trim();
    expect(line.split('\n')).toHaveLength(1);
    expect(line).toContain("the feed no longer knows the cursor's event evt_999999999999 (HTTP 400");
    expect(line).toContain('retrying cannot help');
    for (const fix of [
      'feedsync cursor set <event-id>',
      'feedsync cursor reset',
      'feedsync reconcile --from',
    ]) {
      expect(line).toContain(fix);
    }
    expect(line).toMatch(/\(with --source acme\)$/);
  });

  it('cursor set still refuses an id the feed does not know with its own words', async () => {
    const box = await sandbox('cli_lost_cursor_set');
    const res = await runCli(['cursor', 'set', 'evt_999999999999'], {
      PATH,
      ...testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl }),
    });
    expect(res.code).toBe(2);
    expect(res.stderr).toContain('cursor set: the feed does not know the event id evt_999999999999');
  });

  it('https to a server that speaks http is not retried, and the line says what to check', async () => {
    const plain = sim().baseUrl.replace('http://', 'https://');
    const res = await runCli(['webhooks', 'list'], {
      PATH,
      ...testEnv({ schema: 'unused', prefix: 'unused', baseUrl: plain }),
      LOG_LEVEL: 'info',
    });
    expect(res.code).toBe(1);
    expect(logLines(res.stdout).filter((l) => l.waitMs !== undefined)).toEqual([]);
    expect(res.stderr).toMatch(
      /^feedsync: GET \/webhooks: no TLS session with 127\.0\.0\.1:\d+ \(ERR_SSL_[A-Z_]+\): check FEED_BASE_URL \(https:\/\/ to a server that speaks http\?\)/,
    );
  });

  it('a refused connection is retried 3 times, not the whole budget of 8', async () => {
    const port = await freePort();
    const res = await runCli(['webhooks', 'list'], {
      PATH,
      ...testEnv({ schema: 'unused', prefix: 'unused', baseUrl: `http://127.0.0.1:${port}/api` }),
      LOG_LEVEL: 'info',
    });
    expect(res.code).toBe(1);
    const retries = logLines(res.stdout).filter((l) => l.waitMs !== undefined);
    expect(retries.map((l) => l.msg.replace(/in \d+\.\d s$/, 'in … s'))).toEqual(
      [1, 2, 3].map(
        (n) => `GET /webhooks: cannot reach 127.0.0.1:${port} (ECONNREFUSED); retry ${n} of 3 in … s`,
      ),
    );
    expect(retries.every((l) => (l.waitMs ?? 0) <= 1000)).toBe(true);
  });

  describe('send', () => {
    const mail = (to: string, key: string) => [
      'send',
      '--from',
      'app@example.com',
      '--to',
      to,
      '--subject',
      'hi',
      '--html',
      '<p>hi</p>',
      '--idempotency-key',
      key,
    ];
    // A migrated schema: send checks the recipients against its suppressions (none here).
    let schema = '';
    beforeAll(async () => {
      schema = (await sandbox('cli_send')).schema;
    });
    const env = () => ({ PATH, ...testEnv({ schema, prefix: 'unused', baseUrl: sim().baseUrl }) });

    it('on a refused connection says that nothing was sent', async () => {
      const port = await freePort();
      const res = await runCli(mail('a@example.com', 'cli-refused'), {
        ...env(),
        FEED_BASE_URL: `http://127.0.0.1:${port}/api`,
      });
      expect(res.code).toBe(1);
      expect(res.stderr).toContain('feedsync: nothing was sent: no connection to the service was made\n');
      expect(res.stderr).not.toContain('may or may not');
    });

    it('a replay of the same key prints its own line; the key with other fields is a usage error', async () => {
      const key = `cli-replay-${Date.now()}`;
      const first = await runCli(mail('a@example.com', key), env());
      expect(first.code, first.stderr).toBe(0);
      const id = /^sent (\S+) \(idempotency key /.exec(first.stdout)?.[1];
      expect(id).toBeDefined();
      const again = await runCli(mail('a@example.com', key), env());
      expect(again.code).toBe(0);
      expect(again.stdout).toBe(`already sent as ${id} with idempotency key ${key}: nothing sent again\n`);
      const other = await runCli(mail('b@example.com', key), env());
      expect(other.code).toBe(2);
      expect(other.stderr).toBe(
        `feedsync: send: the idempotency key ${key} was used before with other fields (HTTP 409), and nothing was sent: ` +
          'repeat those same fields with it, or leave out --idempotency-key for a new send\n',
      );
    });
  });

  it('a misspelt variable is a warning naming the right one; doctor warns of it too', async () => {
    const box = await sandbox('cli_typo_var');
    const env = { PATH, ...testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl }) };
    const status = await runCli(['status'], { ...env, QUEUE_PREFX: 'foo' });
    expect(status.code).toBe(0);
    expect(status.stderr).toBe(
      'feedsync: warning: QUEUE_PREFX is not a variable feedsync reads, so it is ignored; did you mean QUEUE_PREFIX?\n',
    );
    const doctor = await runCli(['doctor', '--json'], { ...env, QUEUE_PREFX: 'foo' });
    const config = (
      JSON.parse(doctor.stdout) as { checks: { name: string; status: string; message: string }[] }
    ).checks[0]!;
    expect(config).toMatchObject({ name: 'config', status: 'warn' });
    expect(config.message).toContain('did you mean QUEUE_PREFIX?');
    expect(doctor.code).toBe(1);
  });

  it('a schema without feedsync tables says so, not "not up to date"', async () => {
    const res = await runCli(['status'], {
      PATH,
      ...testEnv({ schema: 'no_feedsync_here_at_all', prefix: 'unused' }),
      DATABSE_SCHEMA: 'x',
    });
    expect(res.code).toBe(2);
    expect(res.stderr).toBe(
      'feedsync: warning: DATABSE_SCHEMA is not a variable feedsync reads, so it is ignored; did you mean DATABASE_SCHEMA?\n' +
        'feedsync: the schema "no_feedsync_here_at_all" (DATABASE_SCHEMA) has no feedsync tables yet: check ' +
        'DATABASE_SCHEMA, or run "feedsync migrate" to create them there\n',
    );
  });

  it('sync on a schema without feedsync tables says so too, and does not steer to sync --migrate', async () => {
    const res = await runCli(['sync', '--once'], {
      PATH,
      ...testEnv({ schema: 'no_feedsync_here_either', prefix: 'unused', baseUrl: 'http://127.0.0.1:9/api' }),
    });
    expect(res.code).toBe(2);
    expect(res.stderr).toContain(
      'the schema "no_feedsync_here_either" (DATABASE_SCHEMA) has no feedsync tables yet: check DATABASE_SCHEMA',
    );
    expect(res.stderr).not.toContain('sync --migrate');
  });
});
