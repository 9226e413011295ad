import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../src/api/client.js';
import { createStore, type Store } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrate.js';
import { signWebhookPayload } from '../../src/webhooks/signature.js';
import { testEnv } from '../support/config.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import {
  CLI,
  freePort,
  killChildren,
  type RunningChild,
  runCli,
  spawnNode,
  waitFor,
} from '../support/processes.js';
import { deletePrefix, uniquePrefix } from '../support/redis.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import { count, emailEvent } from './helpers.js';

const schema = uniqueSchema('wh_commands');
const prefix = uniquePrefix('wh-commands');
const sim = useSimulator();
let store: Store;

beforeAll(async () => {
  store = createStore({ url: TEST_DATABASE_URL, schema });
  await migrate(store);
});
afterAll(async () => {
  await killChildren();
  await store.close();
  await dropSchema(schema);
  await deletePrefix(prefix);
});

/** The environment of the API commands: the simulator's URL and a key. */
const apiEnv = () => testEnv({ schema, prefix, baseUrl: sim().baseUrl });
/** The receiver's environment: no FEED_BASE_URL, no FEED_API_KEY. */
function receiverEnv(
  secret: string,
  port: number,
  extra: Record<string, string> = {},
): Record<string, string> {
  const { FEED_API_KEY: _key, ...env } = testEnv({ schema, prefix });
  return { ...env, LOG_LEVEL: 'info', WEBHOOK_SECRET: secret, WEBHOOK_PORT: String(port), ...extra };
}

async function get(port: number, path: string): Promise<number> {
  try {
    const res = await request(`http://127.0.0.1:${port}${path}`);
    await res.body.dump();
    return res.statusCode;
  } catch {
    return 0;
  }
}

async function startReceiver(env: Record<string, string>, port: number): Promise<RunningChild> {
  const child = spawnNode([CLI, 'serve-webhooks'], env);
  await waitFor(async () => (await get(port, '/healthz')) === 200 || child.process.exitCode !== null, {
    what: 'serve-webhooks to listen',
    timeoutMs: 30_000,
  });
  expect(child.process.exitCode).toBeNull();
  return child;
}

describe('feedsync serve-webhooks (the built command)', () => {
  it('refuses to start without WEBHOOK_SECRET: exit 2 naming it', async () => {
    const { WEBHOOK_SECRET: _none, ...env } = receiverEnv('x', await freePort());
    const r = await runCli(['serve-webhooks'], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('WEBHOOK_SECRET');
  });

  it('refuses to start on a schema that is not migrated: exit 2 saying to migrate', async () => {
    const r = await runCli(
      ['serve-webhooks'],
      receiverEnv('whsec_x_secret', await freePort(), { DATABASE_SCHEMA: uniqueSchema('wh_none') }),
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('feedsync migrate');
  });

  it('with Postgres unreachable: runs, answers 503, is not ready, and exits 0 on SIGTERM', async () => {
    const port = await freePort();
    const secret = 'whsec_unreachable_secret';
    const child = await startReceiver(
      receiverEnv(secret, port, { DATABASE_URL: 'postgres://postgres:pw-never-logged@127.0.0.1:1/test' }),
      port,
    );
    expect(await get(port, '/readyz')).toBe(503);
    const body = JSON.stringify(emailEvent());
    const res = await request(`http://127.0.0.1:${port}/webhooks`, {
      method: 'POST',
      body,
      headers: { 'service-signature': signWebhookPayload(body, secret) },
    });
    expect(res.statusCode).toBe(503);
    await res.body.dump();
    child.signal('SIGTERM');
    const r = await child.waitExit(15_000);
    expect(r.code).toBe(0);
    expect(`${r.stdout}${r.stderr}`).not.toContain(secret);
    expect(`${r.stdout}${r.stderr}`).not.toContain('pw-never-logged');
  }, 120_000);
});

describe('feedsync webhooks, with a receiver started by serve-webhooks', () => {
  it('create prints the secret once with a warning; test reaches the receiver; list; delete; SIGTERM exits 0', async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}/webhooks`;
    const created = await runCli(['webhooks', 'create', '--url', url, '--events', '*', '--json'], apiEnv());
    expect(created.code).toBe(0);
    expect(created.stderr).toContain('shown only this once');
    expect(created.stderr).toContain('secret manager');
    const wh = JSON.parse(created.stdout) as { id: string; url: string; signing_secret: string };
    expect(wh).toMatchObject({
      id: expect.any(String),
      url,
      signing_secret: expect.stringMatching(/^whsec_/),
    });

    const receiver = await startReceiver(receiverEnv(wh.signing_secret, port), port);
    expect(await get(port, '/readyz')).toBe(200);

    const tested = await runCli(['webhooks', 'test', wh.id], apiEnv());
    expect(tested.code).toBe(0);
    expect(tested.stdout).toMatch(
      /^sent a webhook\.test event evt_test_\w+ to wh_\w+; the receiver answered 200\n$/,
    );
    expect(await count(store, 'events', `type = 'webhook.test' AND received_via = 'webhook'`)).toBe(1);

    // Mail sent now is delivered to the receiver and stored.
    const client = new ServiceClient({ baseUrl: sim().baseUrl, apiKey: TEST_API_KEY });
    await client.sendEmail({ from: 'a@example.com', to: ['delivered@example.com'], subject: 's', html: 'h' });
    await client.close();
    await waitFor(async () => (await count(store, 'events', `type LIKE 'email.%'`)) === 2, {
      what: 'the email events delivered to the receiver',
      timeoutMs: 30_000,
    });

    const listed = await runCli(['webhooks', 'list'], apiEnv());
    expect(listed.code).toBe(0);
    expect(listed.stdout.split('\n')[0]).toMatch(/^ID\s+URL\s+EVENTS\s+CREATED$/);
    expect(listed.stdout).toContain(wh.id);
    expect(listed.stdout).toContain(url);
    const json = await runCli(['webhooks', 'list', '--json'], apiEnv());
    expect(JSON.parse(json.stdout)).toEqual([expect.objectContaining({ id: wh.id, url, events: ['*'] })]);
    expect(`${listed.stdout}${json.stdout}`).not.toContain(wh.signing_secret);

    receiver.signal('SIGTERM');
    const stopped = await receiver.waitExit(15_000);
    expect(stopped.code).toBe(0);
    const output = `${stopped.stdout}${stopped.stderr}`;
    expect(output).toContain('receiving webhooks');
    expect(output).not.toContain(wh.signing_secret);
    expect(await get(port, '/healthz')).toBe(0);

    const deleted = await runCli(['webhooks', 'delete', wh.id], apiEnv());
    expect(deleted).toMatchObject({ code: 0, stdout: `deleted ${wh.id}\n` });
    expect((await runCli(['webhooks', 'list'], apiEnv())).stdout).toBe('no webhooks registered\n');
    const again = await runCli(['webhooks', 'delete', wh.id], apiEnv());
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('404');
  }, 120_000);

  it('create without --json prints a table and the secret line', async () => {
    const r = await runCli(
      [
        'webhooks',
        'create',
        '--url',
        'https://app.example.com/hooks',
        '--events',
        'email.delivered,email.bounced',
      ],
      apiEnv(),
    );
    expect(r.code).toBe(0);
    const [header, row, secret] = r.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^ID\s+URL\s+EVENTS\s+CREATED$/);
    expect(row).toContain('email.delivered,email.bounced');
    expect(secret).toMatch(/^signing secret: whsec_[0-9a-f]+$/);
    const id = row!.split(/\s+/)[0]!;
    expect((await runCli(['webhooks', 'delete', id], apiEnv())).code).toBe(0);
  });

  it.each([
    ['a bad event type', ['--url', 'https://x.example/h', '--events', 'delivered'], 'not a full type name'],
    ['an empty --events', ['--url', 'https://x.example/h', '--events', ' , '], '--events is empty'],
    ['a relative --url', ['--url', '/hooks', '--events', '*'], 'absolute http(s) URL'],
    ['an ftp --url', ['--url', 'ftp://x.example/h', '--events', '*'], 'absolute http(s) URL'],
    ['no --url', ['--events', '*'], "required option '--url <url>'"],
    ['no --events', ['--url', 'https://x.example/h'], "required option '--events <types>'"],
  ])('create with %s: exit 2, before any request', async (_name, args, message) => {
    const before = JSON.stringify(sim().stats().requests['POST /api/webhooks'] ?? {});
    const r = await runCli(['webhooks', 'create', ...args], apiEnv());
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(message);
    expect(JSON.stringify(sim().stats().requests['POST /api/webhooks'] ?? {})).toBe(before);
  });

  it('needs FEED_BASE_URL and FEED_API_KEY: exit 2 naming them', async () => {
    const { FEED_BASE_URL: _url, ...noUrl } = apiEnv();
    const a = await runCli(['webhooks', 'list'], noUrl);
    expect(a.code).toBe(2);
    expect(a.stderr).toContain('FEED_BASE_URL');
    const { FEED_API_KEY: _key, ...noKey } = apiEnv();
    const b = await runCli(['webhooks', 'list'], noKey);
    expect(b.code).toBe(2);
    expect(b.stderr).toContain('FEED_API_KEY');
  });

  it('a rejected key: exit 3', async () => {
    const r = await runCli(['webhooks', 'list'], { ...apiEnv(), FEED_API_KEY: 'wrong' });
    expect(r.code).toBe(3);
  });
});
