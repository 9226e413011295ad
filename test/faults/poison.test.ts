import { afterAll, expect, it } from 'vitest';
import type { ServiceEvent } from '../../src/api/types.js';
import { MAX_DATA_DEPTH, MAX_EMAIL_ID_LENGTH } from '../../src/feed/envelope.js';
import { jsonText } from '../../src/feed/json-text.js';
import { createLogger } from '../../src/logger.js';
import { startWebhookService } from '../../src/webhooks/webhook-service.js';
import { addRefusingTrigger as addTrigger, nested, quarantinedRaw } from '../support/poison-items.js';
import { killChildren, runCli } from '../support/processes.js';
import { deliver, poolFor, SECRET_NEW } from '../webhooks/helpers.js';
import { fateOf } from './support/fate.js';
import { feedEvents, startFeedServer } from './support/feed-server.js';
import { type Measured, measured } from './support/results.js';
import { type Sandbox, useSandboxes } from './support/sandbox.js';

const EVENTS = 1_000;
const LIMIT = 100;
const sandbox = useSandboxes();
afterAll(() => killChildren());

/** The refusing trigger on a sandbox's schema. */
async function addRefusingTrigger(box: Sandbox): Promise<void> {
  await addTrigger(box.store.pool, box.schema);
}

/**
 * Serves EVENTS events with every `every`-th replaced by poison (`make(n)` for the
 * n-th), runs `feedsync sync --once` through the CLI, and checks the claim: exit 0,
 * the cursor at the last event, every good event stored and enqueued once, every
 * poison event stored (when it is valid after all) or quarantined once.
 */
async function poisonRun(
  label: string,
  rec: Measured,
  every: number,
  make: (n: number, base: ServiceEvent) => ServiceEvent,
  prepare?: (box: Sandbox) => Promise<void>,
): Promise<{ box: Sandbox; poison: ServiceEvent[]; stored: Set<string> }> {
  const box = await sandbox(label);
  await prepare?.(box);
  const events = feedEvents(EVENTS);
  const poison: ServiceEvent[] = [];
  for (let i = every - 1, n = 0; i < events.length - 1; i += every, n++) {
    events[i] = make(n, events[i]!);
    poison.push(events[i]!);
  }
  const feed = await startFeedServer(events);
  try {
    const cli = await runCli(
      ['sync', '--once'],
      box.env(feed.baseUrl, { FEED_PAGE_LIMIT: String(LIMIT) }),
      120_000,
    );
    rec.figures.push(['exit code of sync --once', cli.code ?? 'signal']);
    expect(cli.code, cli.stderr).toBe(0);
  } finally {
    await feed.close();
  }
  const s = `"${box.schema}"`;
  const { rows: ids } = await box.store.pool.query<{ id: string }>(`SELECT id FROM ${s}.events`);
  const stored = new Set(ids.map((r) => r.id));
  const { rows: q } = await box.store.pool.query<{ raw: string }>(`SELECT raw FROM ${s}.quarantine`);
  const raws = q.map((r) => r.raw);
  const poisonIds = new Set(poison.map((e) => e.id));
  const good = events.filter((e) => !poisonIds.has(e.id));
  const storedPoison = poison.filter((e) => stored.has(e.id));
  const fate = await fateOf(box, [...good, ...storedPoison]);
  const quarantinedOnce = poison.filter((e) => raws.filter((r) => r === quarantinedRaw(e)).length === 1);
  const unaccounted = poison.filter((e) => !stored.has(e.id) && !quarantinedOnce.includes(e));
  const both = storedPoison.filter((e) => raws.includes(quarantinedRaw(e)));
  const { rows: cursor } = await box.store.pool.query<{ after_id: string }>(
    `SELECT after_id FROM ${s}.cursors`,
  );
  rec.injected = poison.length;
  rec.checked = events.length;
  rec.lost = fate.lost + unaccounted.length;
  rec.duplicated = fate.duplicated + both.length + (raws.length - quarantinedOnce.length);
  rec.figures.push(
    ['good events stored and enqueued', good.length - fate.lost],
    ['poison events quarantined, with their reason', quarantinedOnce.length],
    ['poison events stored (valid once normalised)', storedPoison.length],
    ['cursor at the last event', cursor[0]?.after_id === events.at(-1)!.id ? 'yes' : 'no'],
  );
  expect(fate).toMatchObject({ lost: 0, duplicated: 0, strangers: 0, unpublished: 0 });
  expect({ unaccounted: unaccounted.length, both: both.length }).toEqual({ unaccounted: 0, both: 0 });
  expect(cursor[0]?.after_id).toBe(events.at(-1)!.id);
  return { box, poison, stored };
}

const HOW =
  `A feed server on node:http run by the test serves ${EVENTS.toLocaleString('en-US')} email events in pages of ${LIMIT} ` +
  '(ten pages commit together), with poison spread over them; one `feedsync sync --once` through the CLI.';

it('11. created_at that Postgres refuses as written', async () => {
  const forms = [
    '2024-05-01T10:00:00+16:00',
    '2024-05-01T10:00:00-23:59',
    `2024-05-01T10:00:00.${'7'.repeat(300)}Z`,
    '2016-12-31T23:59:60Z',
    '2024-05-01t10:00:00z',
    '2024-05-01T10:00:00+01:60',
    '2024-05-01T10:00:00+24:00',
    '2024-05-01T24:00:00Z',
  ];
  await measured(
    {
      item: 11,
      title: 'created_at that Postgres refuses as written',
      claim:
        'A valid RFC 3339 created_at that Postgres would refuse or misread as written (an offset of 16 hours or more, ' +
        'hundreds of fraction digits, a leap second, lowercase t and z) is stored as its UTC instant; an invalid one ' +
        '(minutes of 60, an offset of 24 hours, hour 24) is quarantined; the rest of the batch commits, the run exits 0.',
      method: `${HOW} Every 25th event carries one of ${forms.length} created_at forms in turn.`,
    },
    async (rec) => {
      rec.injectedWhat = 'timestamps';
      const { stored, poison } = await poisonRun('poison_ts', rec, 25, (n, e) => ({
        ...e,
        created_at: forms[n % forms.length]!,
      }));
      // The first five forms are valid RFC 3339 and stored; the last three are quarantined.
      const valid = poison.filter((_, n) => n % forms.length < 5);
      expect(poison.filter((e) => stored.has(e.id))).toEqual(valid);
    },
  );
});

it('12. an email_id past the index row limit', async () => {
  await measured(
    {
      item: 12,
      title: 'an email_id past the index row limit',
      claim:
        `An email event whose data.email_id is longer than ${MAX_EMAIL_ID_LENGTH} characters (about 2.7 KB breaks ` +
        'the btree row limit of email_status) is quarantined with its reason; the rest of the batch commits, the run exits 0.',
      method: `${HOW} Every 100th event has an email_id of 3,000 characters.`,
    },
    async (rec) => {
      rec.injectedWhat = 'long email_ids';
      await poisonRun('poison_eid', rec, 100, (n, e) => ({
        ...e,
        data: { ...e.data, email_id: `em_${n}_${'x'.repeat(3_000)}` },
      }));
    },
  );
});

it('13. data nested past what a serializer takes', async () => {
  await measured(
    {
      item: 13,
      title: 'data nested past what a serializer takes',
      claim:
        `An event whose data nests deeper than ${MAX_DATA_DEPTH} levels (5,000 ran JSON.stringify out of stack) is ` +
        'quarantined, raw and whole; the rest of the batch commits, the run exits 0.',
      method: `${HOW} Every 100th event carries data nested 5,000 levels deep.`,
    },
    async (rec) => {
      rec.injectedWhat = 'deep events';
      await poisonRun('poison_deep', rec, 100, (n, e) => ({
        ...e,
        data: { ...e.data, n, x: nested(5_000) },
      }));
    },
  );
});

it('14. a value Postgres refuses that no check foresaw', async () => {
  const codes = ['22023', '22P02', '22007', '23514', '54000', '54001'];
  await measured(
    {
      item: 14,
      title: 'a value Postgres refuses that no check foresaw',
      claim:
        'When the batch statement fails with a data error (SQLSTATE class 22, 23 other than unique, 54), the batch is ' +
        'stored again in halves under savepoints; each refused event is quarantined with its SQLSTATE and the rest ' +
        'commits with the cursor move, once.',
      method:
        `${HOW} A trigger the test adds to the events table raises, for every 50th event, one of ` +
        `${codes.join(', ')} in turn.`,
    },
    async (rec) => {
      rec.injectedWhat = 'refusals';
      const { box, poison } = await poisonRun(
        'poison_net',
        rec,
        50,
        (n, e) => ({ ...e, data: { ...e.data, refuse: codes[n % codes.length]! } }),
        addRefusingTrigger,
      );
      const { rows } = await box.store.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${box.schema}".quarantine WHERE reason LIKE 'the database refused it (SQLSTATE %'`,
      );
      rec.figures.push(['quarantine reasons naming the SQLSTATE', rows[0]!.n]);
      expect(rows[0]!.n).toBe(poison.length);
    },
  );
});

it('15. the same poison as webhook deliveries', async () => {
  await measured(
    {
      item: 15,
      title: 'the same poison as webhook deliveries',
      claim:
        'A signed delivery that can never be stored (each class above) is answered 400 and quarantined once, however ' +
        'often the service retries it; 503 is only for what a retry can fix (a serialization failure, here).',
      method:
        'serve-webhooks on a free port, on the real Postgres with the refusing trigger; each poison delivery is sent ' +
        'three times (the first and two retries), then one delivery that Postgres fails with 40001.',
    },
    async (rec) => {
      rec.injectedWhat = 'poison deliveries';
      const box = await sandbox('poison_wh');
      await addRefusingTrigger(box);
      const config = box.config(null, { WEBHOOK_SECRET: SECRET_NEW });
      const service = await startWebhookService(config, {
        logger: createLogger({ level: 'silent' }),
        port: 0,
        host: '127.0.0.1',
        store: box.store,
      });
      const pool = poolFor(service.server.url, 2);
      try {
        const base = feedEvents(1)[0]!;
        const poison: ServiceEvent[] = [
          { ...base, id: 'wh_ts', created_at: '2024-05-01T10:00:00+01:60' },
          { ...base, id: 'wh_eid', data: { email_id: 'x'.repeat(3_000) } },
          { ...base, id: 'wh_deep', data: { x: nested(5_000) } },
          { ...base, id: 'wh_22', data: { refuse: '22023' } },
          { ...base, id: 'wh_54', data: { refuse: '54001' } },
        ];
        const answers = new Map<number, number>();
        for (const e of poison) {
          for (let attempt = 0; attempt < 3; attempt++) {
            const res = await deliver(pool, jsonText(e));
            answers.set(res.status, (answers.get(res.status) ?? 0) + 1);
            rec.injected++;
          }
        }
        const retryable = await deliver(
          pool,
          JSON.stringify({ ...base, id: 'wh_40', data: { refuse: '40001' } }),
        );
        const s = `"${box.schema}"`;
        const { rows } = await box.store.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM ${s}.quarantine`,
        );
        const { rows: ev } = await box.store.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM ${s}.events`,
        );
        rec.checked = poison.length;
        rec.lost = Math.max(0, poison.length - rows[0]!.n);
        rec.duplicated = Math.max(0, rows[0]!.n - poison.length) + ev[0]!.n;
        rec.figures.push(
          ...[...answers].map(([status, n]): [string, number] => [`poison deliveries answered ${status}`, n]),
          ['quarantine rows (one per poison event)', rows[0]!.n],
          ['answer to a delivery Postgres fails with 40001', retryable.status],
        );
        expect([...answers]).toEqual([[400, poison.length * 3]]);
        expect(rows[0]!.n).toBe(poison.length);
        expect(ev[0]!.n).toBe(0);
        expect(retryable.status).toBe(503);
      } finally {
        await pool.close();
        await service.close();
      }
    },
  );
});
