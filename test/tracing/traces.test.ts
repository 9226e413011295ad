import { type AddressInfo, createServer, type Socket } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { secretsOf } from '../../src/config/secrets.js';
import { createConsumer } from '../../src/consumer/index.js';
import { routeFor } from '../../src/queue/routes.js';
import { createApplier } from '../../src/store/applier.js';
import { startTracing } from '../../src/tracing/start.js';
import { createDeliveryHandler } from '../../src/webhooks/receiver.js';
import { signWebhookPayload } from '../../src/webhooks/signature.js';
import { testEnv } from '../support/config.js';
import { captureLogger } from '../support/logs.js';
import { TEST_DATABASE_URL } from '../support/postgres.js';
import { killChildren, runCli, waitFor } from '../support/processes.js';
import { TEST_QUEUE_ENV } from '../support/queues.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import { useSandboxes } from '../sync/harness.js';
import { type ExportedSpan, type OtlpReceiver, startOtlpReceiver } from './otlp-receiver.js';

// One event followed from the feed to a consumer's handler, through a real OpenTelemetry
// SDK and its OTLP/HTTP exporter: `sync --once` (a child, configured by the standard
// variables) and a consumer (this process, with the SDK started as an application would)
// both export to a receiver started here.

const BACKLOG = 700;
const sim = useSimulator({ backlog: BACKLOG });
const sandbox = useSandboxes();
const pool = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 6 });
let receiver: OtlpReceiver;
beforeAll(async () => {
  receiver = await startOtlpReceiver();
});
afterAll(async () => {
  await killChildren();
  await pool.end();
  await receiver.close();
});

const byName = (spans: ExportedSpan[], name: string) => spans.filter((s) => s.name === name);

describe('traces', () => {
  it('a collector that accepts and never answers delays no exit past the 5 s flush, whatever OTEL_EXPORTER_OTLP_TIMEOUT says', async () => {
    const sockets = new Set<Socket>();
    const blackHole = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => blackHole.listen(0, '127.0.0.1', resolve));
    try {
      const box = await sandbox('traces_black_hole');
      const env = testEnv(
        { schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl },
        {
          OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(blackHole.address() as AddressInfo).port}`,
          OTEL_EXPORTER_OTLP_TIMEOUT: '60000',
          OTEL_TRACES_SAMPLER: 'always_on',
        },
      );
      const started = performance.now();
      const run = await runCli(['sync', '--once'], env, 60_000);
      const tookMs = performance.now() - started;
      expect(run.code, run.stderr).toBe(0);
      // The spans were offered: the collector was reached, and held.
      expect(sockets.size).toBeGreaterThan(0);
      // The run itself takes a few seconds at most here; without the cap it exits after the 60 s export timeout.
      expect(tookMs).toBeLessThan(30_000);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => blackHole.close(() => resolve()));
    }
  });

  it('a synced backlog: every stored event is handled in a span linked to the commit that stored it', async () => {
    const box = await sandbox('traces');
    const env = testEnv(
      { schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl },
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        OTEL_SERVICE_NAME: 'feedsync-sync',
        OTEL_TRACES_SAMPLER: 'always_on',
      },
    );
    const run = await runCli(['sync', '--once'], env, 60_000);
    expect(run.code, run.stderr).toBe(0);

    const sync = receiver.spans.filter((s) => s.service === 'feedsync-sync');
    const [turn, ...otherTurns] = byName(sync, 'source turn');
    expect(otherTurns).toEqual([]);
    expect(turn!.attributes).toMatchObject({
      'feedsync.source': 'default',
      'feedsync.turn.status': 'caught-up',
      'feedsync.events.stored': BACKLOG,
      'feedsync.outbox.drained': true,
    });
    // The tree: every feed request and every commit is a child of the turn.
    const pages = byName(sync, 'feed page');
    const commits = byName(sync, 'commit');
    expect(pages.length).toBeGreaterThan(BACKLOG / 100);
    expect(turn!.attributes['feedsync.pages']).toBe(pages.length);
    for (const child of [...pages, ...commits]) {
      expect(child.traceId).toBe(turn!.traceId);
      expect(child.parentSpanId).toBe(turn!.spanId);
    }
    expect(pages.every((p) => p.attributes['http.response.status_code'] === 200)).toBe(true);
    expect(pages.reduce((n, p) => n + Number(p.attributes['feedsync.page.events']), 0)).toBe(BACKLOG);
    expect(commits.reduce((n, c) => n + Number(c.attributes['feedsync.events.new']), 0)).toBe(BACKLOG);
    expect(commits.every((c) => c.attributes['feedsync.events.duplicate'] === 0)).toBe(true);
    expect(commits.every((c) => c.attributes['feedsync.events.quarantined'] === 0)).toBe(true);
    // Every job published, in batches that link to the commits they carry.
    const commitIds = new Set(commits.map((c) => c.spanId));
    const publishes = byName(sync, 'publish');
    expect(publishes.reduce((n, p) => n + Number(p.attributes['messaging.batch.message_count']), 0)).toBe(
      BACKLOG,
    );
    for (const p of publishes) {
      expect(p.links.length).toBeGreaterThan(0);
      for (const link of p.links) expect(commitIds.has(link.spanId)).toBe(true);
    }

    // `send`: a span with counts, never an address.
    const send = await runCli(
      [
        'send',
        '--from',
        'app@example.com',
        '--to',
        'delivered@example.com',
        '--subject',
        'Hi',
        '--html',
        '<p>hi</p>',
      ],
      env,
    );
    expect(send.code, send.stderr).toBe(0);
    expect(byName(receiver.spans, 'send')).toEqual([
      expect.objectContaining({
        parentSpanId: '',
        attributes: expect.objectContaining({
          'feedsync.send.recipients': 1,
          'feedsync.send.replayed': false,
        }),
      }),
    ]);

    // The consumer, in an application that runs the SDK.
    const stopTracing = startTracing({
      url: `${receiver.endpoint}/v1/traces`,
      serviceName: 'billing',
      sampler: 'always_on',
      ratio: 1,
    });
    const consumer = createConsumer({
      name: 'billing',
      pool,
      schema: box.schema,
      handlers: {
        'email.sent': async () => {},
        'email.delivered': async () => {},
        'email.bounced': async () => {},
        'email.complained': async () => {},
        'email.failed': async () => {},
      },
      concurrency: 8,
      env: { REDIS_URL: env.REDIS_URL, QUEUE_PREFIX: box.prefix, LOG_LEVEL: 'warn', ...TEST_QUEUE_ENV },
    });
    await consumer.migrate();
    const running = consumer.run();
    const handledCount = async () =>
      (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${box.schema}".feedsync_inbox`))
        .rows[0]!.n;
    await waitFor(async () => (await handledCount()) === BACKLOG, { timeoutMs: 60_000 });
    await consumer.close();
    await running;
    // Webhook deliveries received in the same application: the check's result, and the commit as a child.
    const secret = 'whsec_tracing_test_secret';
    const handle = createDeliveryHandler({
      secrets: [secret],
      source: 'default',
      applier: createApplier(box.store, routeFor(loadConfig(env).queues)),
      logger: captureLogger().logger,
    });
    const delivery = JSON.stringify({
      type: 'email.bounced',
      id: 'evt_webhook_only',
      created_at: '2026-01-01T00:00:00.000Z',
      data: { email_id: 'em_webhook_only', to: ['bounced.person@example.com'] },
    });
    expect(
      (await handle(Buffer.from(delivery), { 'service-signature': signWebhookPayload(delivery, secret) }))
        .status,
    ).toBe(200);
    expect(
      (
        await handle(Buffer.from(delivery), {
          'service-signature': signWebhookPayload(delivery, 'whsec_wrong'),
        })
      ).status,
    ).toBe(401);
    await stopTracing();

    const deliveries = byName(receiver.spans, 'webhook delivery');
    expect(deliveries.map((d) => d.attributes['feedsync.webhook.verification'])).toEqual([
      'valid',
      'mismatch',
    ]);
    expect(deliveries.map((d) => d.attributes['http.response.status_code'])).toEqual([200, 401]);
    const webhookCommits = byName(receiver.spans, 'commit').filter((c) => c.service === 'billing');
    expect(webhookCommits).toEqual([
      expect.objectContaining({
        parentSpanId: deliveries[0]!.spanId,
        attributes: expect.objectContaining({ 'feedsync.received_via': 'webhook', 'feedsync.events.new': 1 }),
      }),
    ]);
    for (const s of [secret, ...secretsOf(loadConfig(env))])
      expect(receiver.bodies.join('\n')).not.toContain(s);

    const handled = receiver.spans.filter((s) => s.service === 'billing' && s.name === 'handle job');
    expect(handled).toHaveLength(BACKLOG);
    // A link, not a parent: each job is a trace of its own, pointing at the commit that stored its event.
    const links = new Map<string, number>();
    for (const h of handled) {
      expect(h.parentSpanId).toBe('');
      expect(h.links).toHaveLength(1);
      const [link] = h.links;
      expect(link!.traceId).toBe(turn!.traceId);
      expect(commitIds.has(link!.spanId)).toBe(true);
      expect(h.attributes['feedsync.job.applied']).toBe(true);
      links.set(link!.spanId, (links.get(link!.spanId) ?? 0) + 1);
    }
    // Each commit is linked from exactly as many jobs as it stored events.
    for (const c of commits) expect(links.get(c.spanId) ?? 0).toBe(c.attributes['feedsync.events.new']);
    const { rows } = await pool.query<{ id: string; data: { email_id: string; to: string[] } }>(
      `SELECT id, data FROM "${box.schema}".events`,
    );
    expect(rows).toHaveLength(BACKLOG + 1);

    // No span carries a key, an address or job data, whatever its name or attribute.
    const exported = receiver.bodies.join('\n');
    expect(exported).not.toContain(TEST_API_KEY);
    expect(exported).not.toMatch(/[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/);
    const leaked = rows.filter(
      (r) =>
        exported.includes(`"${r.id}"`) ||
        exported.includes(r.data.email_id) ||
        r.data.to.some((a) => exported.includes(a)),
    );
    expect(leaked.map((r) => r.id)).toEqual([]);
  }, 120_000);
});
