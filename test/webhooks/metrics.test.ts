import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore, type Store } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrate.js';
import { testEnv } from '../support/config.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import { CLI, freePort, killChildren, spawnNode, waitFor } from '../support/processes.js';
import { parseMetrics, sampleOf } from '../support/prom-text.js';
import { deletePrefix, uniquePrefix } from '../support/redis.js';
import { deliver, emailEvent, poolFor, SECRET_NEW, SECRET_OLD, send } from './helpers.js';

const schema = uniqueSchema('wh_metrics');
const prefix = uniquePrefix('wh-metrics');
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

async function get(url: string): Promise<{ status: number; body: string }> {
  const res = await request(url);
  return { status: res.statusCode, body: await res.body.text() };
}

describe('serve-webhooks /metrics', () => {
  it('counts answers by status, refused signatures by reason, and times each commit', async () => {
    const [webhookPort, metricsPort] = [await freePort(), await freePort()];
    const { FEED_API_KEY: _key, ...env } = testEnv({ schema, prefix });
    const child = spawnNode([CLI, 'serve-webhooks'], {
      ...env,
      FEED_SOURCE: 'acme',
      WEBHOOK_SECRET: SECRET_NEW,
      WEBHOOK_PORT: String(webhookPort),
      METRICS_PORT: String(metricsPort),
      WEBHOOK_MAX_BODY_BYTES: '2048',
    });
    const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
    await waitFor(
      () =>
        get(metricsUrl)
          .then((r) => r.status === 200)
          .catch(() => false),
      {
        what: 'serve-webhooks to serve /metrics',
        timeoutMs: 30_000,
      },
    );
    const pool = poolFor(`http://127.0.0.1:${webhookPort}/webhooks`, 2);
    try {
      const event = JSON.stringify(emailEvent());
      const now = Math.floor(Date.now() / 1000);
      const statuses = [
        await deliver(pool, event),
        await deliver(pool, event), // a repeat: 200, already stored
        await deliver(pool, JSON.stringify(emailEvent('email.bounced'))),
        await send(pool, { body: event }), // no header
        await send(pool, { body: event, headers: { 'service-signature': 't=soon,v1=00' } }),
        await deliver(pool, event, SECRET_NEW, now - 3600), // stale
        await deliver(pool, event, SECRET_OLD), // a secret this receiver does not hold
        await deliver(pool, 'not json'), // signed, quarantined
        await deliver(pool, 'x'.repeat(4096)), // over WEBHOOK_MAX_BODY_BYTES
        await send(pool, { method: 'GET' }),
        await send(pool, { method: 'GET', path: '/healthz' }), // a probe, not a delivery
      ].map((a) => a.status);
      expect(statuses).toEqual([200, 200, 200, 401, 401, 401, 401, 400, 413, 405, 200]);

      const text = (await get(metricsUrl)).body;
      const samples = parseMetrics(text);
      const requests = (status: string) =>
        sampleOf(samples, 'feedsync_webhook_requests_total', { source: 'acme', status });
      expect([requests('200'), requests('401'), requests('400'), requests('413'), requests('405')]).toEqual([
        3, 4, 1, 1, 1,
      ]);
      // Present before any 503, so an alert's increase() sees the first one.
      expect(requests('503')).toBe(0);
      for (const reason of ['missing', 'malformed', 'stale', 'mismatch']) {
        expect(
          sampleOf(samples, 'feedsync_webhook_signature_failures_total', { source: 'acme', reason }),
          reason,
        ).toBe(1);
      }
      // Three events reached the store (one a repeat) and one body went to quarantine: four transactions.
      expect(sampleOf(samples, 'feedsync_webhook_commit_duration_seconds_count', { source: 'acme' })).toBe(4);
      expect(text).not.toContain(SECRET_NEW);
      // Its own relay hands the two new events to BullMQ, counted as the worker counts its own.
      const published = await waitFor(
        async () => {
          const now = parseMetrics((await get(metricsUrl)).body);
          const email = sampleOf(now, 'feedsync_jobs_published_total', { queue: 'email-events' });
          return email === 2 ? now : null;
        },
        { what: 'the relay to publish two jobs' },
      );
      expect(sampleOf(published, 'feedsync_jobs_published_total', { queue: 'contact-events' })).toBe(0);
      // The webhook port, open to the ingress controller, does not show the metrics.
      expect((await send(pool, { method: 'GET', path: '/metrics' })).status).toBe(404);
    } finally {
      await pool.close();
    }
    child.signal('SIGTERM');
    expect((await child.waitExit(30_000)).code).toBe(0);
  });

  it('refuses to start when METRICS_PORT is taken: exit 1, the receiver closed again', async () => {
    const webhookPort = await freePort();
    const blocker = (await import('node:net')).createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '0.0.0.0', resolve));
    const taken = (blocker.address() as { port: number }).port;
    try {
      const { FEED_API_KEY: _key, ...env } = testEnv({ schema, prefix });
      const child = spawnNode([CLI, 'serve-webhooks'], {
        ...env,
        WEBHOOK_SECRET: SECRET_NEW,
        WEBHOOK_PORT: String(webhookPort),
        METRICS_PORT: String(taken),
      });
      const result = await child.waitExit(30_000);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`METRICS_PORT ${taken} is already in use`);
      expect(result.stdout + result.stderr).not.toContain(SECRET_NEW);
    } finally {
      blocker.close();
    }
  });
});
