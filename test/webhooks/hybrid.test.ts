import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../src/api/client.js';
import type { Config } from '../../src/config/config-type.js';
import type { Simulator } from '../../src/simulator/index.js';
import { createStore, type Store } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrate.js';
import { createSync } from '../../src/sync/sync.js';
import { startWebhookService, type WebhookService } from '../../src/webhooks/webhook-service.js';
import { testConfig } from '../support/config.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import { waitFor } from '../support/processes.js';
import { dropQueues, migrateTestQueues, queuePrefixName } from '../support/queues.js';
import { startTestSimulator, TEST_API_KEY } from '../support/simulator.js';
import { captureLogger, jobIds } from './helpers.js';

const schema = uniqueSchema('wh_hybrid');
const prefix = queuePrefixName('wh-hybrid');
let sim: Simulator;
let client: ServiceClient;
let store: Store;
let proxy: { url: string; server: Server; target: string; blocked: (emailId: string) => boolean };
let service: WebhookService;
let config: Config;
let secret: string;
const logs: ReturnType<typeof captureLogger>[] = [];

/**
 * Stands between the service and the receiver: deliveries of the emails that
 * `blocked` picks are answered 500, every time, so the service gives up on them.
 */
async function startProxy(): Promise<typeof proxy> {
  const state = {
    target: '',
    blocked: (_emailId: string) => false,
  };
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
    const body = Buffer.concat(chunks);
    let emailId = '';
    try {
      emailId = String(JSON.parse(body.toString('utf8'))?.data?.email_id ?? '');
    } catch {
      // Not ours to judge: the receiver answers it.
    }
    if (!state.target || state.blocked(emailId)) {
      res.writeHead(500).end('blocked by the test');
      return;
    }
    const headers: Record<string, string> = {};
    for (const name of ['content-type', 'service-signature']) {
      const value = req.headers[name];
      if (typeof value === 'string') headers[name] = value;
    }
    const answer = await request(state.target, { method: 'POST', headers, body });
    res.writeHead(answer.statusCode, { 'content-type': 'application/json' }).end(await answer.body.text());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    server,
    get target() {
      return state.target;
    },
    set target(value: string) {
      state.target = value;
    },
    get blocked() {
      return state.blocked;
    },
    set blocked(fn: (emailId: string) => boolean) {
      state.blocked = fn;
    },
  };
}

beforeAll(async () => {
  // The whole retry schedule (about a day) in about a second.
  sim = await startTestSimulator({ timeScale: 0.00001 });
  client = new ServiceClient({ baseUrl: sim.baseUrl, apiKey: TEST_API_KEY });
  store = createStore({ url: TEST_DATABASE_URL, schema });
  await migrate(store);
  await migrateTestQueues(prefix);
  proxy = await startProxy();
  const created = await client.createWebhook({ url: proxy.url, events: ['*'] });
  secret = created.signing_secret;
  config = testConfig({ schema, prefix, baseUrl: sim.baseUrl }, { WEBHOOK_SECRET: secret });
  const log = captureLogger();
  logs.push(log);
  service = await startWebhookService(config, { logger: log.logger, port: 0, host: '127.0.0.1' });
  proxy.target = service.server.url;
});
afterAll(async () => {
  await service?.close();
  await new Promise<void>((resolve) => {
    proxy?.server.close(() => resolve());
    proxy?.server.closeAllConnections();
  });
  await client?.close();
  await sim?.close();
  await store.close();
  await dropSchema(schema);
  await dropQueues(prefix);
});

const RECIPIENTS = [
  'delivered@example.com',
  'bounced@example.com',
  'failed@example.com',
  'someone@example.com',
];

async function sendMail(n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const { id } = await client.sendEmail({
      from: 'app@example.com',
      to: [RECIPIENTS[i % RECIPIENTS.length]!],
      subject: `hybrid ${i}`,
      html: '<p>x</p>',
    });
    ids.push(id);
  }
  return ids;
}

/** Waits until every delivery attempt so far has ended: `ok` accepted, `failing` given up after the whole schedule. */
async function settled(ok: number, failing: number, attemptsPerFailure = 8): Promise<void> {
  await waitFor(
    () => {
      const d = sim.stats().webhook_deliveries;
      return d.succeeded === ok && d.failed === failing * attemptsPerFailure;
    },
    { timeoutMs: 60_000, what: `${ok} deliveries accepted and ${failing} given up` },
  );
}

async function stored(): Promise<Map<string, string>> {
  const { rows } = await store.pool.query<{ id: string; received_via: string }>(
    `SELECT id, received_via FROM "${schema}".events`,
  );
  return new Map(rows.map((r) => [r.id, r.received_via]));
}

/** The feed's events, read straight from the simulator. */
async function feed(): Promise<{ id: string; type: string; data: { email_id?: string } }[]> {
  const page = await client.eventsPage({ limit: 1_000 });
  return (page.body as { data: { id: string; type: string; data: { email_id?: string } }[] }).data;
}

describe('hybrid mode: webhooks for latency, sync --once as reconciliation', () => {
  it('the feed run fills exactly the deliveries that failed for good', async () => {
    // Every third email's deliveries fail for good.
    proxy.blocked = (emailId) => Number(emailId.replace(/\D/g, '')) % 3 === 0;
    const emailIds = await sendMail(12);
    const all = await feed();
    const missed = all.filter((e) => proxy.blocked(e.data.email_id ?? ''));
    const reached = all.filter((e) => !proxy.blocked(e.data.email_id ?? ''));
    expect(missed.length).toBeGreaterThan(0);
    await settled(reached.length, missed.length);

    const viaWebhook = await stored();
    expect([...viaWebhook.keys()].sort()).toEqual(reached.map((e) => e.id).sort());
    expect(new Set(viaWebhook.values())).toEqual(new Set(['webhook']));

    const sentBefore = sim.stats().emails_sent;
    const log = captureLogger();
    logs.push(log);
    const sync = createSync(config, { logger: log.logger, store });
    try {
      const run = await sync.runOnce();
      expect(run.status).toBe('caught-up');
      expect(run.stored).toBe(missed.length);
      expect(run.duplicates).toBe(reached.length);
      expect(run.drained).toBe(true);
    } finally {
      await sync.close();
    }

    const after = await stored();
    expect(after.size).toBe(all.length);
    for (const e of missed) expect(after.get(e.id)).toBe('feed');
    for (const e of reached) expect(after.get(e.id)).toBe('webhook');
    const status = await store.pool.query(`SELECT count(*)::int AS n FROM "${schema}".email_status`);
    expect(status.rows[0].n).toBe(emailIds.length);
    // Every routed event's job was added once, whichever path stored it.
    await service.relay.drain();
    const jobs = await jobIds(prefix, config.queues.emailEvents);
    expect(jobs.sort()).toEqual(all.map((e) => `default/${e.id}`).sort());
    expect(sim.stats().emails_sent).toBe(sentBefore);
  }, 120_000);

  it('a receiver and a feed sync running at the same time store each event once', async () => {
    proxy.blocked = () => false;
    const before = sim.stats().webhook_deliveries;
    const beforeEvents = (await feed()).length;
    const log = captureLogger();
    logs.push(log);
    const sync = createSync(config, { logger: log.logger, store });
    try {
      // Deliveries start as each send returns; sync runs follow one another while they land.
      let sending = true;
      const syncing = (async () => {
        for (let i = 0; i < 200 && sending; i++) await sync.runOnce();
      })();
      await sendMail(60).finally(() => {
        sending = false;
      });
      await syncing;
      const total = (await feed()).length;
      await settled(before.succeeded + (total - beforeEvents), before.failed / 8);
      const last = await sync.runOnce();
      expect(last.status).toBe('caught-up');
    } finally {
      await sync.close();
    }
    const all = await feed();
    const { rows } = await store.pool.query<{ n: number; d: number }>(
      `SELECT count(*)::int AS n, count(DISTINCT id)::int AS d FROM "${schema}".events`,
    );
    expect(rows[0]).toEqual({ n: all.length, d: all.length });
    const viaBoth = new Set((await stored()).values());
    expect([...viaBoth].every((v) => v === 'feed' || v === 'webhook')).toBe(true);
    await service.relay.drain();
    const jobs = await jobIds(prefix, config.queues.emailEvents);
    expect(jobs).toHaveLength(all.length);
    expect(new Set(jobs).size).toBe(all.length);
  }, 120_000);

  it('neither the signing secret nor the API key appears in any log', () => {
    const text = logs.map((l) => l.text()).join('');
    expect(text.length).toBeGreaterThan(0);
    expect(text).not.toContain(secret);
    expect(text).not.toContain(TEST_API_KEY);
  });
});
