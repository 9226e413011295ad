import { request } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { testEnv } from '../support/config.js';
import { dropSchema, uniqueSchema } from '../support/postgres.js';
import { CLI, freePort, killChildren, runCli, spawnNode, waitFor } from '../support/processes.js';
import { deletePrefix, uniquePrefix } from '../support/redis.js';
import { useSimulator } from '../support/simulator.js';

const schema = uniqueSchema('watch_fail');
const prefix = uniquePrefix('watch_fail');
// Every feed request answers 5xx until the test turns the knob back.
const sim = useSimulator({ backlog: 300, faults: { rate5xx: 1 } });
const env = () => ({ PATH: process.env.PATH ?? '', ...testEnv({ schema, prefix, baseUrl: sim().baseUrl }) });

afterAll(async () => {
  await killChildren();
  await dropSchema(schema);
  await deletePrefix(prefix);
});

async function get(url: string): Promise<{ status: number; body: string }> {
  const res = await request(url);
  return { status: res.statusCode, body: await res.body.text() };
}

/** The value of an unlabelled sample in a Prometheus text page; null when absent. */
function sample(page: string, name: string): number | null {
  const m = page.match(new RegExp(`^${name}\\{source="default"\\} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : null;
}

describe('sync --watch on a feed that fails every run', () => {
  it('counts each failed run, reports the failures in a row, keeps both probes green, and recovers', async () => {
    expect((await runCli(['migrate'], env())).code).toBe(0);
    const port = await freePort();
    // No retries inside a run: each run is one 5xx and fails; the loop backs off 100, 200, 400, 800, 1000 ms.
    const child = spawnNode([CLI, 'sync', '--watch'], {
      ...env(),
      METRICS_PORT: String(port),
      SYNC_INTERVAL_MS: '100',
      FEED_MAX_RETRIES: '0',
    });
    const base = `http://127.0.0.1:${port}`;
    const scrape = async (): Promise<string | null> => {
      const m = await get(`${base}/metrics`).catch(() => null);
      return m?.status === 200 ? m.body : null;
    };

    const failing = await waitFor(
      async () => {
        const page = await scrape();
        return page !== null && (sample(page, 'feedsync_run_failures_total') ?? 0) >= 5 ? page : null;
      },
      { what: 'five failed runs in /metrics', timeoutMs: 30_000 },
    );
    const failures = sample(failing, 'feedsync_run_failures_total')!;
    // Nothing succeeded yet, so every failure so far is one in a row.
    expect(sample(failing, 'feedsync_run_consecutive_failures')).toBe(failures);
    expect(sample(failing, 'feedsync_last_success_timestamp_seconds') ?? 0).toBe(0);
    expect(failing).toMatch(
      /^feedsync_feed_request_duration_seconds_count\{source="default",status="5xx"\} [1-9]/m,
    );
    // The loop is alive and Postgres and Redis answer: the service's outage restarts no pod.
    expect(await get(`${base}/healthz`)).toMatchObject({ status: 200 });
    expect(await get(`${base}/readyz`)).toMatchObject({ status: 200 });
    expect(sim().stats().requests['GET /api/events']?.['200'] ?? 0).toBe(0);

    sim().setFaults({ rate5xx: 0 });
    // The cursor row says "caught up" before the run has drained the outbox and returned: wait for both.
    const recovered = await waitFor(
      async () => {
        const page = await scrape();
        return page !== null && sample(page, 'feedsync_run_consecutive_failures') === 0 ? page : null;
      },
      { what: 'a run that did not fail, after the outage', timeoutMs: 30_000 },
    );
    expect(sample(recovered, 'feedsync_last_success_timestamp_seconds')).toBeGreaterThan(0);
    // Failures stay counted: the alert reads increase() of the counter.
    expect(sample(recovered, 'feedsync_run_failures_total')).toBeGreaterThanOrEqual(failures);
    const stored = [
      ...recovered.matchAll(/^feedsync_events_stored_total\{source="default",type="[^"]+"\} (\d+)$/gm),
    ]
      .map((m) => Number(m[1]))
      .reduce((a, b) => a + b, 0);
    expect(stored).toBe(300);
    expect(await get(`${base}/healthz`)).toMatchObject({ status: 200 });

    child.signal('SIGTERM');
    expect((await child.waitExit(10_000)).code).toBe(0);
  });
});
