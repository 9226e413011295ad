import { createServer } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../src/api/client.js';
import { queryBuilder } from '../../src/store/db.js';
import { testEnv } from '../support/config.js';
import { freePort, killChildren, runCli } from '../support/processes.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import { cursorOf, useSandboxes } from '../sync/harness.js';

const sim = useSimulator({ backlog: 20 });
const sandbox = useSandboxes();
const PATH = process.env.PATH ?? '';
afterAll(killChildren);

const id = (position: number): string => `evt_${String(position).padStart(12, '0')}`;
const requests = (route: string): number =>
  Object.values(sim().stats().requests[route] ?? {}).reduce((a, b) => a + b, 0);

describe('input is checked before anything moves (exit 2)', () => {
  it('cursor set: an id the feed does not know, or an empty one, leaves the cursor where it was', async () => {
    const box = await sandbox('cli_cursor_set');
    const env = { PATH, ...testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl }) };
    expect((await runCli(['cursor', 'set', id(5)], env)).code).toBe(0);

    const bogus = await runCli(['cursor', 'set', 'bogus'], env);
    expect(bogus.code).toBe(2);
    expect(bogus.stderr).toBe(
      'feedsync: cursor set: the feed does not know the event id bogus ' +
        '("after" is not the id of an event in the feed: bogus); the cursor was not moved\n',
    );
    const empty = await runCli(['cursor', 'set', ''], { ...env, FEED_SOURCE: 'a b' });
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain(`"feedsync cursor reset --source 'a b'"`);
    expect(await cursorOf(box.store)).toBe(id(5));
    // The next run still works: nothing was moved to an id the feed refuses.
    expect((await runCli(['sync', '--once'], env)).code).toBe(0);
    expect(await cursorOf(box.store)).toBe(id(20));
  });

  it('reconcile --from an id the feed does not know reads nothing', async () => {
    const box = await sandbox('cli_reconcile_from');
    const env = { PATH, ...testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl }) };
    const res = await runCli(['reconcile', '--from', 'bogus'], env);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain('--from bogus: the feed does not know this event id');
    const { rows } = await box.store.pool.query(`SELECT count(*)::int AS n FROM "${box.schema}".events`);
    expect(rows[0]).toEqual({ n: 0 });
  });

  it('FEED_TYPES with a typo names the closest type; no cursor is saved', async () => {
    const box = await sandbox('cli_types');
    const env = { PATH, ...testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl }) };
    const res = await runCli(['sync', '--once'], { ...env, FEED_TYPES: 'email.delivred' });
    expect(res.code).toBe(2);
    expect(res.stderr).toContain('FEED_TYPES: "email.delivred" is not an event type of this release');
    expect(res.stderr).toContain('did you mean email.delivered?');
    expect(await (await queryBuilder(box.store)).selectFrom('cursors').selectAll().execute()).toEqual([]);
    const marked = await runCli(['sync', '--once'], { ...env, FEED_TYPES: 'email.sent,+email.opened' });
    expect(marked.code, marked.stderr).toBe(0);
    const row = await (await queryBuilder(box.store))
      .selectFrom('cursors')
      .selectAll()
      .executeTakeFirstOrThrow();
    expect(row.types).toEqual(['email.opened', 'email.sent']);
  });

  it('send --from that is no address is refused before any request; a display name is fine', async () => {
    // A migrated schema: send checks the recipients against its suppressions (none here).
    const box = await sandbox('cli_send_from');
    const env = { PATH, ...testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl }) };
    const fields = ['--to', 'b@example.com', '--subject', 'Hi', '--html', '<p>Hi</p>'];
    const before = requests('POST /api/emails');
    for (const from of ['nope', 'Acme app@example.com', '<app@example.com', 'a@b, c@d']) {
      const res = await runCli(['send', '--from', from, ...fields], env);
      expect(res.code, from).toBe(2);
      expect(res.stderr).toContain(`send: --from "${from}" is neither an address`);
    }
    expect(requests('POST /api/emails')).toBe(before);
    for (const from of ['app@example.com', 'Acme <app@example.com>', '"Acme, Inc." <app@example.com>']) {
      const res = await runCli(['send', '--from', from, ...fields], env);
      expect(res.code, `${from}: ${res.stderr}`).toBe(0);
    }
  });

  it('webhooks test exits 1 with the reason when the receiver refuses the connection', async () => {
    const env = { PATH, ...testEnv({ schema: 'unused', prefix: 'unused', baseUrl: sim().baseUrl }) };
    const client = new ServiceClient({ baseUrl: sim().baseUrl, apiKey: TEST_API_KEY });
    const refused = await client.createWebhook({
      url: `http://127.0.0.1:${await freePort()}/webhooks`,
      events: ['email.sent'],
    });
    // A receiver that answers: a bare TCP server that answers every request 204.
    const server = createServer((socket) =>
      socket.once('data', () => socket.end('HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n')),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    const good = await client.createWebhook({
      url: `http://127.0.0.1:${port}/webhooks`,
      events: ['email.sent'],
    });
    await client.close();
    try {
      const res = await runCli(['webhooks', 'test', refused.id], env);
      expect(res.code).toBe(1);
      expect(res.stdout).toMatch(/the receiver did not answer \(.*ECONNREFUSED.*\)/);
      expect(res.stderr).toMatch(
        new RegExp(`^feedsync: the receiver of webhook ${refused.id} did not answer`),
      );
      const ok = await runCli(['webhooks', 'test', good.id], env);
      expect(ok.code, ok.stderr).toBe(0);
      expect(ok.stdout).toContain('the receiver answered 204');
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
