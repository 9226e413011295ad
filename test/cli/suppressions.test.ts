import { beforeAll, describe, expect, it } from 'vitest';
import { createApplier } from '../../src/store/applier.js';
import { createStore } from '../../src/store/db.js';
import { event, route } from '../store/migrated-store.js';
import { TEST_DATABASE_URL } from '../support/postgres.js';
import { runCli } from '../support/processes.js';
import type { Sandbox } from '../sync/harness.js';
import { useCliSandbox } from './cli-sandbox.js';

const { sim, box: sandbox, env } = useCliSandbox('cli_suppressions');
let box: Sandbox;
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
  box = sandbox();
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

    const other = await runCli(
      ['suppressions', 'list', '--source', 'elsewhere'],
      env({ FEED_SOURCE: 'elsewhere' }),
    );
    expect(other.stdout).toBe('source elsewhere: no suppressed addresses\n');
  });

  it('list shows the first 100 rows and how many it left out; --all and --json show them all', async () => {
    await box.store.pool.query(
      `INSERT INTO "${box.schema}".suppressions (source, address, reason, event_id, at)
       SELECT 'bulk', 'person' || lpad(i::text, 3, '0') || '@example.com', 'bounced', 'evt_' || i, now()
       FROM generate_series(1, 120) AS i`,
    );
    const bulk = env({ FEED_SOURCE: 'bulk' });
    const bounded = await runCli(['suppressions', 'list'], bulk);
    expect(bounded.code, bounded.stderr).toBe(0);
    const lines = bounded.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe('source bulk: 120 suppressions; the first 100 by address');
    expect(lines).toHaveLength(1 + 1 + 100 + 1);
    expect(lines.at(-1)).toBe('… 20 more rows left out: --all lists them all');
    const all = await runCli(['suppressions', 'list', '--all'], bulk);
    expect(all.stdout.trimEnd().split('\n')).toHaveLength(1 + 1 + 120);
    const json = await runCli(['suppressions', 'list', '--json'], bulk);
    expect(JSON.parse(json.stdout)).toHaveLength(120);
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
      /^removed bounced@example\.com from the suppressions of source default \(it was bounced, by event evt_\d+ of .+\)\nBounced@Example\.com is not suppressed for source default: it may be sent to\n$/,
    );
    const log = r.stderr
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(log).toContainEqual(
      expect.objectContaining({
        source: 'default',
        reasons: ['bounced'],
        msg: expect.stringContaining('removed'),
      }),
    );
    expect(r.stderr.toLowerCase()).not.toContain('bounced@example.com');

    const again = await runCli(['suppressions', 'remove', 'bounced@example.com'], env());
    expect(again.code).toBe(0);
    expect(again.stdout).toBe(
      'bounced@example.com has no bounced or complained suppression for source default: nothing removed\n' +
        'bounced@example.com is not suppressed for source default: it may be sent to\n',
    );
    const list = await runCli(['suppressions', 'list', '--json'], env());
    expect((JSON.parse(list.stdout) as { address: string }[]).map((s) => s.address)).toEqual([
      'complained@example.com',
      'gone@example.com',
    ]);
  });

  it('lifting a bounce leaves the unsubscribe of the contact standing: send still refuses', async () => {
    const ivan = 'bounced+ivan@example.com';
    sim().emitContactEvent('contact.unsubscribed', ivan);
    // Sent before the records know of the unsubscribe: the simulator bounces it.
    const first = await runCli(send(ivan, '--allow-suppressed'), env());
    expect(first.code, first.stderr).toBe(0);
    const sync = await runCli(['sync', '--once'], env());
    expect(sync.code, sync.stderr).toBe(0);

    const removed = await runCli(['suppressions', 'remove', ivan], env());
    expect(removed.code, removed.stderr).toBe(0);
    expect(removed.stdout).toMatch(/^removed bounced\+ivan@example\.com .*\(it was bounced, /);
    expect(removed.stdout).toMatch(
      /is still suppressed for source default: unsubscribed \(event evt_\d+ of [^;]+; the contact's own latest state; lift with --reason unsubscribed --override-unsubscribe\)\n$/,
    );
    const sent = sim().stats().emails_sent;
    const refused = await runCli(send(ivan), env());
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('(unsubscribed ');
    expect(sim().stats().emails_sent).toBe(sent);

    const refusedLift = await runCli(['suppressions', 'remove', ivan, '--reason', 'unsubscribed'], env());
    expect(refusedLift.code).toBe(2);
    expect(refusedLift.stderr).toContain("the contact's own latest state");
    const lifted = await runCli(
      ['suppressions', 'remove', ivan, '--reason', 'unsubscribed', '--override-unsubscribe'],
      env(),
    );
    expect(lifted.code, lifted.stderr).toBe(0);
    expect(lifted.stdout).toMatch(
      /it was unsubscribed, .*\n.* is not suppressed for source default: it may be sent to\n$/,
    );
    const allowed = await runCli(send(ivan), env());
    expect(allowed.code, allowed.stderr).toBe(0);
  });

  it('send refuses an address whatever white space, format characters or normal form the events gave it', async () => {
    const store = createStore({ url: TEST_DATABASE_URL, schema: box.schema });
    try {
      const at = new Date().toISOString();
      const bounce = (id: string, to: string) =>
        event(id, 'email.bounced', at, { email_id: `m-${id}`, to: [to] });
      const result = await createApplier(store, route).apply({
        source: 'default',
        receivedVia: 'webhook',
        events: [
          bounce('nb1', 'erin@example.com\u00a0'),
          bounce('nb2', 'frank@example.com\u200b'),
          bounce('nb3', 'gre\u0301g@example.com'),
          event('nb4', 'contact.subscribed', '2099-01-01T00:00:00.000Z', { email: 'hank@example.com' }),
          event('nb5', 'contact.unsubscribed', at, { email: 'hank@example.com' }),
        ],
        quarantine: [],
      });
      expect(result.status).toBe('applied');
    } finally {
      await store.close();
    }
    const sent = sim().stats().emails_sent;
    for (const to of [
      'erin@example.com',
      'frank@example.com',
      'gr\u00e9g@example.com',
      'gre\u0301g@example.com',
      'hank@example.com',
    ]) {
      const r = await runCli(send(to), env());
      expect(r.code, `${to}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toContain('nothing was sent now: suppressed for source default');
    }
    expect(sim().stats().emails_sent).toBe(sent);
  });

  it('send refuses after an unsubscribe that arrived after a subscribe dated ahead within the skew', async () => {
    const store = createStore({ url: TEST_DATABASE_URL, schema: box.schema });
    try {
      const applier = createApplier(store, route);
      const dated = (minutes: number) => new Date(Date.now() + minutes * 60_000).toISOString();
      for (const e of [
        event('sk1', 'contact.subscribed', dated(4), { email: 'skew@example.com' }),
        event('sk2', 'contact.unsubscribed', dated(1), { email: 'skew@example.com' }),
      ]) {
        const result = await applier.apply({
          source: 'default',
          receivedVia: 'webhook',
          events: [e],
          quarantine: [],
        });
        expect(result.status).toBe('applied');
      }
    } finally {
      await store.close();
    }
    const sent = sim().stats().emails_sent;
    const r = await runCli(send('skew@example.com'), env());
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(
      /suppressed for source default: skew@example\.com \(unsubscribed [^)]*, event sk2\)/,
    );
    expect(sim().stats().emails_sent).toBe(sent);
  });

  it('send refuses every form of a bounced mailbox: domain folded as mail is routed, names and lists reduced', async () => {
    // [what a bounce's data.to held, what send is then asked to send to]
    const variants: [string, string][] = [
      ['person@example.com', 'person@example.com.'],
      ['person@example.com', 'person@example.com..'],
      ['person@example.com', 'person@EXAMPLE.COM'],
      ['person@example.com', 'PERSON@example.com'],
      ['person@example.com', 'person@\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com'],
      ['person@example.com', 'person@\uff25\uff38\uff21\uff2d\uff30\uff2c\uff25.com'],
      ['person@example.com', 'person@example\u3002com'],
      ['person@example.com', 'person@example\uff0ecom'],
      ['person@example.com', 'person@example\uff61com'],
      ['person@example.com', 'person@exa\u034fmple.com'],
      ['person@example.com', 'person@exa\u00admple.com'],
      ['person@example.com', 'person@exa\ufe0fmple.com'],
      ['person@example.com', 'person@example.com\u200b'],
      ['dotted@example.com.', 'dotted@example.com'],
      ['wide@\uff45xample\u3002com', 'wide@example.com'],
      ['idn@b\u00fccher.example', 'idn@xn--bcher-kva.example'],
      ['idn@b\u00fccher.example', 'idn@B\u00dcCHER.example'],
      ['puny@xn--bcher-kva.example', 'puny@b\u00fccher.example'],
      ['Bob <bob@example.com>', 'bob@example.com'],
      ['"Gina, G." <gina@example.com> (work)', 'gina@example.com'],
      ['carol@example.com, dave@example.com', 'carol@example.com'],
      ['carol@example.com, dave@example.com', 'dave@example.com'],
      ['erin@example.com; Frank <frank@example.com>', 'frank@example.com'],
      ['hal@example.com ivy@example.com', 'ivy@example.com'],
    ];
    const store = createStore({ url: TEST_DATABASE_URL, schema: box.schema });
    try {
      const at = new Date().toISOString();
      const result = await createApplier(store, route).apply({
        source: 'default',
        receivedVia: 'feed',
        events: [...new Set(variants.map(([to]) => to))].map((to, i) =>
          event(`mb${i}`, 'email.bounced', at, { email_id: `m-mb${i}`, to: [to] }),
        ),
        quarantine: [],
      });
      expect(result.status).toBe('applied');
    } finally {
      await store.close();
    }
    const sent = sim().stats().emails_sent;
    for (const [bounced, to] of variants) {
      const r = await runCli(send(to), env());
      expect(r.code, `${bounced} then ${to}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toContain('nothing was sent now: suppressed for source default');
    }
    expect(sim().stats().emails_sent).toBe(sent);
  }, 120_000);

  it.each([
    ['no address', ['suppressions', 'remove'], 'missing required argument'],
    ['not an address', ['suppressions', 'remove', 'nobody'], 'not an email address'],
    ['a source name Postgres cannot carry', ['suppressions', 'list', '--source', 'a\u0001b'], 'source'],
    ['no subcommand', ['suppressions'], 'Usage: feedsync suppressions'],
    ['an unknown reason', ['suppressions', 'remove', 'a@example.com', '--reason', 'spam'], 'none of bounced'],
    [
      'an unsubscribe lifted without the flag',
      ['suppressions', 'remove', 'a@example.com', '--reason', 'unsubscribed'],
      '--override-unsubscribe',
    ],
    ['an unknown flag', ['suppressions', 'list', '--every'], "unknown option '--every'"],
  ])('%s: exit 2 with a message', async (_name, args, message) => {
    const r = await runCli(args, env());
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(message);
  });
});
