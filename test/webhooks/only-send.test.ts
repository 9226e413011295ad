import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../src/api/client.js';
import { createStore } from '../../src/store/db.js';
import { testEnv } from '../support/config.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import { CLI, freePort, killChildren, runCli, spawnNode, waitFor } from '../support/processes.js';
import { deletePrefix, uniquePrefix } from '../support/redis.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const schema = uniqueSchema('wh_only_send');
const prefix = uniquePrefix('wh-only-send');
const sim = useSimulator({ backlog: 250 });

afterAll(async () => {
  await killChildren();
  await dropSchema(schema);
  await deletePrefix(prefix);
});

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith('.ts') ? [relative(ROOT, path)] : [];
  });
}

/**
 * Files that may name the send or the endpoint, and why:
 * - the API client defines sendEmail, the one function that posts to /emails;
 * - `feedsync send` is the one command that calls it;
 * - the simulator serves POST /api/emails (it is the service's stand-in, and calls nothing);
 * - the demo sends only to the simulator it starts in its own process (checked below).
 */
const ALLOWED = new Set(['src/api/client.ts', 'src/cli/commands/send.ts', 'src/cli/demo.ts']);
const isSimulator = (file: string) => file.startsWith('src/simulator/');

describe('POST /emails is reached only by feedsync send', () => {
  it('no source file outside the allowed ones calls sendEmail or names the /emails path', () => {
    const offenders = sources(join(ROOT, 'src'))
      .filter((file) => !ALLOWED.has(file) && !isSimulator(file))
      .filter((file) => /\bsendEmail\b|\/emails\b/.test(readFileSync(join(ROOT, file), 'utf8')));
    expect(offenders).toEqual([]);
  });

  it('the client has one place that posts to /emails, and only send.ts calls it among the commands', () => {
    const client = readFileSync(join(ROOT, 'src/api/client.ts'), 'utf8');
    expect(client.match(/path: '\/emails'/g)).toHaveLength(1);
    const commands = sources(join(ROOT, 'src/cli'));
    const callers = commands.filter((f) => /\.sendEmail\(/.test(readFileSync(join(ROOT, f), 'utf8')));
    expect(callers.sort()).toEqual(['src/cli/commands/send.ts', 'src/cli/demo.ts']);
  });

  it('the demo builds its client on the in-process simulator only', () => {
    const demo = readFileSync(join(ROOT, 'src/cli/demo.ts'), 'utf8');
    // Its one config points the feed at the simulator, and every client is made from that config.
    expect(demo).toMatch(/const config: Config = \{[^;]*feed: \{[^}]*baseUrl: sim\.baseUrl/s);
    const clients = demo.match(/clientFor\([^)]*\)/g) ?? [];
    expect(clients.length).toBeGreaterThan(0);
    for (const made of clients) expect(made).toBe('clientFor(config)');
    expect(demo).not.toMatch(/new ServiceClient\(|createSync\((?!config,)/);
  });

  it('every other command, run against the simulator, sends nothing; send does', async () => {
    const env = testEnv({ schema, prefix, baseUrl: sim().baseUrl });
    const posts = () =>
      Object.values(sim().stats().requests['POST /api/emails'] ?? {}).reduce((a, b) => a + b, 0);
    const run = async (args: string[]) => {
      const r = await runCli(args, env, 60_000);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
      return r;
    };
    const sent0 = sim().stats().emails_sent;
    const posts0 = posts();
    // The mail this test sends itself, to have deliveries and feed events to work on.
    let ownSends = 0;
    const client = new ServiceClient({ baseUrl: sim().baseUrl, apiKey: TEST_API_KEY });
    const mail = async () => {
      ownSends += 1;
      await client.sendEmail({ from: 'a@example.com', to: ['bounced@example.com'], subject: 's', html: 'h' });
    };

    await run(['migrate']);
    await mail();
    await run(['sync', '--once']);
    await run(['status', '--json']);
    await run(['cursor', 'show']);
    await run(['reconcile']);

    const port = await freePort();
    const created = await run([
      'webhooks',
      'create',
      '--url',
      `http://127.0.0.1:${port}/webhooks`,
      '--events',
      '*',
      '--json',
    ]);
    const wh = JSON.parse(created.stdout) as { id: string; signing_secret: string };
    const { FEED_API_KEY: _key, FEED_BASE_URL: _url, ...receiverEnv } = env;
    const receiver = spawnNode([CLI, 'serve-webhooks'], {
      ...receiverEnv,
      WEBHOOK_SECRET: wh.signing_secret,
      WEBHOOK_PORT: String(port),
    });
    await waitFor(
      async () => {
        const res = await request(`http://127.0.0.1:${port}/readyz`).catch(() => null);
        await res?.body.dump();
        return res?.statusCode === 200;
      },
      { what: 'the receiver', timeoutMs: 30_000 },
    );
    await run(['webhooks', 'test', wh.id]);
    await mail();
    const store = createStore({ url: TEST_DATABASE_URL, schema });
    try {
      // bounced@ gives email.sent and email.bounced; the test event makes one more.
      await waitFor(
        async () => {
          const { rows } = await store.pool.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM "${schema}".events WHERE received_via = 'webhook'`,
          );
          return rows[0]!.n === 3;
        },
        { what: 'the deliveries stored', timeoutMs: 30_000 },
      );
    } finally {
      await store.close();
    }
    await run(['sync', '--once']);
    await run(['webhooks', 'list']);
    await run(['webhooks', 'delete', wh.id]);
    receiver.signal('SIGTERM');
    expect((await receiver.waitExit(15_000)).code).toBe(0);
    await client.close();

    expect(sim().stats().emails_sent).toBe(sent0 + ownSends);
    expect(posts()).toBe(posts0 + ownSends);

    // The same measurement sees a send.
    const r = await runCli(
      ['send', '--from', 'a@example.com', '--to', 'b@example.com', '--subject', 's', '--html', 'h'],
      env,
    );
    expect(r.code).toBe(0);
    expect(sim().stats().emails_sent).toBe(sent0 + ownSends + 1);
    expect(posts()).toBe(posts0 + ownSends + 1);
  }, 120_000);
});
