import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testEnv } from '../support/config.js';
import { killChildren, runCli } from '../support/processes.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import { useSandboxes } from '../sync/harness.js';

const sim = useSimulator();
// A migrated schema: send checks the recipients against its suppressions (none here).
const sandbox = useSandboxes();
let schema = '';
const dir = mkdtempSync(join(tmpdir(), 'feedsync-send-'));
/** Sends reach the simulator through this proxy, which loses the first answer to each key it is told to. */
let proxy: {
  server: Server;
  baseUrl: string;
  loseFirstAnswer: Set<string>;
  keys: string[];
  /** The answers that never reached the client. */
  lost: string[];
};

beforeAll(async () => {
  schema = (await sandbox('send_cli')).schema;
  const state = { loseFirstAnswer: new Set<string>(), keys: [] as string[], lost: [] as string[] };
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
    const key = String(req.headers['idempotency-key'] ?? '');
    if (req.url?.endsWith('/emails')) state.keys.push(key);
    const headers: Record<string, string> = {};
    for (const name of ['authorization', 'content-type', 'idempotency-key']) {
      const value = req.headers[name];
      if (typeof value === 'string') headers[name] = value;
    }
    const answer = await request(`${sim().origin}${req.url}`, {
      method: req.method as 'POST',
      headers,
      body: Buffer.concat(chunks),
    });
    const text = await answer.body.text();
    // The service sent the message, but its answer is lost on the way: the client sees a 502.
    if (state.loseFirstAnswer.delete(key)) {
      state.lost.push(text);
      res.writeHead(502).end('bad gateway');
      return;
    }
    res.writeHead(answer.statusCode, { 'content-type': 'application/json' }).end(text);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  proxy = { server, baseUrl: `http://127.0.0.1:${port}/api`, ...state };
});
afterAll(async () => {
  await killChildren();
  await new Promise<void>((resolve) => {
    proxy?.server.close(() => resolve());
    proxy?.server.closeAllConnections();
  });
  rmSync(dir, { recursive: true, force: true });
});

const env = (baseUrl = sim().baseUrl) => testEnv({ schema, prefix: 'unused', baseUrl });
const FIELDS = [
  '--from',
  'app@example.com',
  '--to',
  'a@example.com',
  '--subject',
  'Hi',
  '--html',
  '<p>Hi</p>',
];
const emailsRequests = () => {
  const byStatus = sim().stats().requests['POST /api/emails'] ?? {};
  return Object.values(byStatus).reduce((a, b) => a + b, 0);
};

describe('feedsync send', () => {
  it('sends once and prints the generated Idempotency-Key, before the request on stderr and with the id', async () => {
    const sent = sim().stats().emails_sent;
    const r = await runCli(['send', ...FIELDS], env());
    expect(r.code).toBe(0);
    const key = /^idempotency key: ([0-9a-f-]{36})$/m.exec(r.stderr)?.[1];
    expect(key).toBeDefined();
    expect(r.stdout).toMatch(new RegExp(`^sent em_\\d+ \\(idempotency key ${key}\\)\\n$`));
    expect(sim().stats().emails_sent).toBe(sent + 1);
    expect(`${r.stdout}${r.stderr}`).not.toContain(TEST_API_KEY);
  });

  it('a second call with the same key reports the same id and sends nothing more', async () => {
    const sent = sim().stats().emails_sent;
    const args = ['send', ...FIELDS, '--idempotency-key', 'order-4711-receipt', '--json'];
    const first = await runCli(args, env());
    const second = await runCli(args, env());
    expect([first.code, second.code]).toEqual([0, 0]);
    const a = JSON.parse(first.stdout);
    expect(a).toEqual({
      id: expect.stringMatching(/^em_/),
      idempotency_key: 'order-4711-receipt',
      replayed: false,
    });
    expect(JSON.parse(second.stdout)).toEqual({ ...a, replayed: true });
    // A given key is not echoed on stderr: the caller already has it.
    expect(first.stderr).toBe('');
    expect(sim().stats().emails_sent).toBe(sent + 1);
  });

  it('the same key with other fields is refused by the service as a usage error (exit 2), and nothing is sent', async () => {
    const sent = sim().stats().emails_sent;
    const args = [
      'send',
      '--idempotency-key',
      'order-4712',
      '--from',
      'app@example.com',
      '--to',
      'a@example.com',
    ];
    expect((await runCli([...args, '--subject', 'one', '--html', 'x'], env())).code).toBe(0);
    const other = await runCli([...args, '--subject', 'two', '--html', 'x'], env());
    expect(other.code).toBe(2);
    expect(other.stderr).toContain('409');
    expect(other.stderr).not.toContain('may or may not');
    expect(sim().stats().emails_sent).toBe(sent + 1);
  });

  it('a retry after a lost answer reuses the key: the service sends once and the same id comes back', async () => {
    const sent = sim().stats().emails_sent;
    proxy.loseFirstAnswer.add('lost-answer-1');
    const r = await runCli(
      ['send', ...FIELDS, '--idempotency-key', 'lost-answer-1', '--json'],
      env(proxy.baseUrl),
    );
    expect(r.code).toBe(0);
    expect(proxy.keys.filter((k) => k === 'lost-answer-1')).toHaveLength(2);
    // The replay answers this run's own first attempt: a send, not "already sent".
    expect(JSON.parse(r.stdout)).toMatchObject({ id: JSON.parse(proxy.lost.at(-1)!).id, replayed: false });
    expect(sim().stats().emails_sent).toBe(sent + 1);
  });

  it('takes recipients repeated and comma-separated, and the body from --html-file', async () => {
    const file = join(dir, 'body.html');
    writeFileSync(file, '<h1>From a file</h1>');
    const r = await runCli(
      [
        'send',
        '--from',
        'app@example.com',
        '--to',
        'a@example.com, b@example.com',
        '--to',
        'c@example.com',
        '--subject',
        '',
        '--html-file',
        file,
        '--json',
      ],
      env(),
    );
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).id).toMatch(/^em_/);
  });

  it.each([
    ['no --from', ['--to', 'a@example.com', '--subject', 's', '--html', 'x'], '--from is required'],
    ['no --to', ['--from', 'f@example.com', '--subject', 's', '--html', 'x'], '--to is required'],
    [
      'an empty --to',
      ['--from', 'f@example.com', '--to', ' , ', '--subject', 's', '--html', 'x'],
      '--to is required',
    ],
    [
      'a bad --to',
      ['--from', 'f@example.com', '--to', 'nobody', '--subject', 's', '--html', 'x'],
      'not an email',
    ],
    [
      'no --subject',
      ['--from', 'f@example.com', '--to', 'a@example.com', '--html', 'x'],
      '--subject is required',
    ],
    [
      'no body',
      ['--from', 'f@example.com', '--to', 'a@example.com', '--subject', 's'],
      '--html or --html-file',
    ],
    [
      'both bodies',
      [
        '--from',
        'f@example.com',
        '--to',
        'a@example.com',
        '--subject',
        's',
        '--html',
        'x',
        '--html-file',
        'y',
      ],
      'not both',
    ],
    [
      'an unreadable --html-file',
      [
        '--from',
        'f@example.com',
        '--to',
        'a@example.com',
        '--subject',
        's',
        '--html-file',
        '/nonexistent/x.html',
      ],
      'cannot read --html-file',
    ],
    ['a too long key', [...FIELDS, '--idempotency-key', 'k'.repeat(257)], '1 to 256 characters'],
  ])('%s: exit 2 with a clear message, before any request', async (_name, args, message) => {
    const before = emailsRequests();
    const r = await runCli(['send', ...args], env());
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(message);
    expect(emailsRequests()).toBe(before);
  });

  it('without FEED_BASE_URL: exit 2 naming it', async () => {
    const { FEED_BASE_URL: _gone, ...rest } = env();
    const r = await runCli(['send', ...FIELDS], rest);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('FEED_BASE_URL');
  });

  it('a rejected key: exit 3', async () => {
    const r = await runCli(['send', ...FIELDS], { ...env(), FEED_API_KEY: 'not-a-key' });
    expect(r.code).toBe(3);
    expect(r.stderr).not.toContain('not-a-key');
  });
});
