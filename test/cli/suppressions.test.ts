import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testEnv } from '../support/config.js';
import { killChildren, runCli } from '../support/processes.js';
import { useSimulator } from '../support/simulator.js';
import { type Sandbox, useSandboxes } from '../sync/harness.js';

const sim = useSimulator();
const sandbox = useSandboxes();
const PATH = process.env.PATH ?? '';
afterAll(killChildren);

let box: Sandbox;
const env = (extra: Record<string, string> = {}) => ({
  PATH,
  ...testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl }),
  ...extra,
});
const send = (to: string, ...more: string[]) => [
  'send',
  '--from',
  'app@example.com',
  '--to',
  to,
  '--subject',
  'Hi',
  '--html',
  '<p>Hi</p>',
  ...more,
];

beforeAll(async () => {
  box = await sandbox('cli_suppressions');
  // What the records are made of: a bounce, a complaint, an unsubscribe, and a contact that
  // unsubscribed and came back.
  for (const to of ['bounced@example.com', 'Complained@Example.com', 'delivered@example.com']) {
    const r = await runCli(send(to), env());
    expect(r.code, r.stderr).toBe(0);
  }
  sim().emitContactEvent('contact.unsubscribed', 'Gone@Example.com');
  sim().emitContactEvent('contact.unsubscribed', 'back@example.com');
  sim().emitContactEvent('contact.subscribed', 'back@example.com');
  const sync = await runCli(['sync', '--once'], env());
  expect(sync.code, sync.stderr).toBe(0);
}, 60_000);

describe('feedsync suppressions', () => {
  it('list prints each suppressed address with its reason, as text and as JSON', async () => {
    const text = await runCli(['suppressions', 'list'], env());
    expect(text.code, text.stderr).toBe(0);
    const lines = text.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe('source default: 3 suppressed addresses');
    expect(lines.slice(2).map((l) => l.split(/\s+/).slice(0, 2))).toEqual([
      ['bounced@example.com', 'bounced'],
      ['complained@example.com', 'complained'],
      ['gone@example.com', 'unsubscribed'],
    ]);

    const json = await runCli(['suppressions', 'list', '--json', '--source', 'default'], env());
    expect(json.code).toBe(0);
    const rows = JSON.parse(json.stdout) as {
      address: string;
      reason: string;
      event_id: string;
      at: string;
    }[];
    expect(rows.map((r) => [r.address, r.reason])).toEqual(
      lines.slice(2).map((l) => l.split(/\s+/).slice(0, 2)),
    );
    for (const r of rows) {
      expect(r.event_id).toMatch(/^evt_/);
      expect(Number.isNaN(Date.parse(r.at))).toBe(false);
    }

    const other = await runCli(['suppressions', 'list', '--source', 'elsewhere'], env());
    expect(other.stdout).toBe('source elsewhere: no suppressed addresses\n');
  });

  it('send refuses a suppressed recipient (exit 2, one line with the reason and the flag); the flag sends', async () => {
    const sent = sim().stats().emails_sent;
    const refused = await runCli(send('delivered@example.com,  COMPLAINED@example.com'), env());
    expect(refused.code).toBe(2);
    const lines = refused.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^feedsync: send: nothing was sent now: suppressed for source default: complained@example\.com \(complained [^)]*, event evt_\d+\); pass --allow-suppressed/,
    );
    expect(refused.stdout).toBe('');
    expect(sim().stats().emails_sent).toBe(sent);

    const allowed = await runCli(send('complained@example.com', '--allow-suppressed'), env());
    expect(allowed.code, allowed.stderr).toBe(0);
    expect(sim().stats().emails_sent).toBe(sent + 1);
  });

  it('a send retried with its idempotency key after its address bounced says the first send stands', async () => {
    const first = await runCli(send('bounced@retry.example', '--idempotency-key', 'retry-key-1'), env());
    expect(first.code, first.stderr).toBe(0);
    const sync = await runCli(['sync', '--once'], env());
    expect(sync.code, sync.stderr).toBe(0);
    const sent = sim().stats().emails_sent;
    const retried = await runCli(send('bounced@retry.example', '--idempotency-key', 'retry-key-1'), env());
    expect(retried.code).toBe(2);
    expect(retried.stderr).toContain(
      'nothing was sent now: suppressed for source default: bounced@retry.example',
    );
    expect(retried.stderr).toContain(
      'an earlier send with idempotency key retry-key-1, if there was one, went out before',
    );
    expect(sim().stats().emails_sent).toBe(sent);
    // The suppressions as the other cases expect them.
    expect((await runCli(['suppressions', 'remove', 'bounced@retry.example'], env())).code).toBe(0);
  });

  it('send to a contact that subscribed again is not refused', async () => {
    const r = await runCli(send('back@example.com'), env());
    expect(r.code, r.stderr).toBe(0);
  });

  it('send refuses to guess when the suppressions cannot be read, and says how to send anyway', async () => {
    const sent = sim().stats().emails_sent;
    const r = await runCli(send('someone@example.com'), env({ DATABASE_SCHEMA: 'never_migrated_here' }));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      'send: nothing was sent: the suppressions of source default could not be checked',
    );
    expect(r.stderr).toContain('--allow-suppressed');
    expect(sim().stats().emails_sent).toBe(sent);
  });

  it('remove deletes one suppression, prints the address, and logs the removal without it', async () => {
    const r = await runCli(['suppressions', 'remove', ' Bounced@Example.com'], env({ LOG_LEVEL: 'info' }));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /^removed bounced@example\.com from the suppressions of source default \(it was bounced, by event evt_\d+ of .+\)\n$/,
    );
    const log = r.stderr
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(log).toContainEqual(
      expect.objectContaining({
        source: 'default',
        reason: 'bounced',
        msg: expect.stringContaining('removed'),
      }),
    );
    expect(r.stderr.toLowerCase()).not.toContain('bounced@example.com');

    const again = await runCli(['suppressions', 'remove', 'bounced@example.com'], env());
    expect(again.code).toBe(0);
    expect(again.stdout).toBe('bounced@example.com is not suppressed for source default: nothing removed\n');
    const list = await runCli(['suppressions', 'list', '--json'], env());
    expect((JSON.parse(list.stdout) as { address: string }[]).map((s) => s.address)).toEqual([
      'complained@example.com',
      'gone@example.com',
    ]);
  });

  it.each([
    ['no address', ['suppressions', 'remove'], 'missing required argument'],
    ['not an address', ['suppressions', 'remove', 'nobody'], 'not an email address'],
    ['a source name Postgres cannot carry', ['suppressions', 'list', '--source', 'a\u0001b'], 'source'],
    ['no subcommand', ['suppressions'], 'Usage: feedsync suppressions'],
    ['an unknown flag', ['suppressions', 'list', '--all'], "unknown option '--all'"],
  ])('%s: exit 2 with a message', async (_name, args, message) => {
    const r = await runCli(args, env());
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(message);
  });
});
