import { createServer } from 'node:http';
import { request } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { testEnv } from '../support/config.js';
import { dropSchema, uniqueSchema } from '../support/postgres.js';
import { CLI, freePort, killChildren, runCli, spawnNode, waitFor } from '../support/processes.js';
import { dropQueues, queuePrefixName, TEST_QUEUE_BACKEND } from '../support/queues.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';

const schema = uniqueSchema('metrics');
const prefix = queuePrefixName('metrics');
const sim = useSimulator({ backlog: 500 });
const env = () => ({ PATH: process.env.PATH ?? '', ...testEnv({ schema, prefix, baseUrl: sim().baseUrl }) });

afterAll(async () => {
  await killChildren();
  await dropSchema(schema);
  await dropQueues(prefix);
});

async function get(url: string): Promise<{ status: number; body: string }> {
  const res = await request(url);
  return { status: res.statusCode, body: await res.body.text() };
}

describe('metrics and health', () => {
  it('sync --watch serves /healthz, /readyz and /metrics, and exits 0 on SIGTERM', async () => {
    expect((await runCli(['migrate'], env())).code).toBe(0);
    const port = await freePort();
    const child = spawnNode([CLI, 'sync', '--watch'], {
      ...env(),
      METRICS_PORT: String(port),
      SYNC_INTERVAL_MS: '200',
    });
    const base = `http://127.0.0.1:${port}`;
    const storedIn = (body: string): number =>
      [...body.matchAll(/^feedsync_events_stored_total\{source="default",type="[^"]+"\} (\d+)$/gm)]
        .map((m) => Number(m[1]))
        .reduce((a, b) => a + b, 0);
    // The first run may still be paging when the endpoint comes up: wait for the whole
    // backlog and for the turn's end (its success is recorded after the last commit).
    const metrics = await waitFor(
      async () => {
        const m = await get(`${base}/metrics`).catch(() => null);
        return m && storedIn(m.body) >= 500 && m.body.includes('feedsync_last_success_timestamp_seconds{')
          ? m.body
          : null;
      },
      { what: 'the first run to show in /metrics', timeoutMs: 15_000 },
    );
    const stored = storedIn(metrics);
    expect(stored).toBe(500);
    for (const name of [
      'feedsync_pages_total{source="default"}',
      'feedsync_feed_request_duration_seconds_bucket',
      'feedsync_jobs_published_total',
      'feedsync_cursor_lag_seconds{source="default"}',
      'feedsync_outbox_backlog',
      'feedsync_last_success_timestamp_seconds{source="default"}',
      'feedsync_run_duration_seconds_count',
      'feedsync_source_held{source="default"}',
    ]) {
      expect(metrics).toContain(name);
    }
    expect(metrics).not.toContain(TEST_API_KEY);
    expect(await get(`${base}/healthz`)).toMatchObject({ status: 200 });
    const ready = await get(`${base}/readyz`);
    expect(ready.status).toBe(200);
    // The queues' check is named for where they are: Redis, or their Postgres (no Redis asked).
    const queues = TEST_QUEUE_BACKEND === 'redis' ? { redis: true } : { queues: true };
    expect(JSON.parse(ready.body)).toEqual({ ok: true, checks: { postgres: true, ...queues } });
    expect((await get(`${base}/nope`)).status).toBe(404);

    child.signal('SIGTERM');
    const result = await child.waitExit(10_000);
    expect(result.code).toBe(0);
    expect(result.stdout + result.stderr).not.toContain(TEST_API_KEY);
  });

  it('a once run logs a summary and pushes its metrics to a Pushgateway', async () => {
    const pushes: { method: string; url: string; body: string }[] = [];
    const gateway = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => {
        body += c.toString();
      });
      req.on('end', () => {
        pushes.push({ method: req.method ?? '', url: req.url ?? '', body });
        res.writeHead(202).end();
      });
    });
    await new Promise<void>((resolve) => gateway.listen(0, '127.0.0.1', resolve));
    const address = gateway.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    try {
      const result = await runCli(['sync', '--once'], {
        ...env(),
        LOG_LEVEL: 'info',
        PUSHGATEWAY_URL: `http://127.0.0.1:${port}`,
      });
      expect(result.code).toBe(0);
      const summary = result.stdout
        .trim()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l.msg === 'sync run finished');
      expect(summary).toMatchObject({ status: 'caught-up', events_stored: 0, outbox_backlog: 0 });
      expect(pushes).toHaveLength(1);
      expect(pushes[0]?.url).toBe('/metrics/job/feedsync/source/default');
      expect(pushes[0]?.body).toContain('feedsync_pages_total');
    } finally {
      gateway.close();
    }
  });
});
