import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testEnv } from '../support/config.js';
import { dropSchema, uniqueSchema } from '../support/postgres.js';
import { CLI, freePort, killChildren, runCli, spawnNode, waitFor } from '../support/processes.js';
import { deletePrefix, uniquePrefix } from '../support/redis.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import { expressionsOf, interpolate, metricNamesOf, readDashboard } from './dashboard.js';
import { alertsOf, type PrometheusServer, startPrometheus } from './prometheus-server.js';
import { ruleSpec, alertsOf as rulesOf, shortened } from './rules.js';

/**
 * The alerts and the dashboard against real parts: a Prometheus server scrapes a real
 * `sync --watch` of one source, one of a fleet (a sources file of three, one of them
 * failing every turn) and a real `serve-webhooks` (the built CLI) that the simulator
 * feeds, with every window and `for:` of the rule file fifty times shorter.
 */
const SOURCE = 'acme';
/** The fleet's source whose key file is missing: it fails every turn. */
const BROKEN = 'broken';
/**
 * Production minutes become test seconds: 15m → 18 s, 5m → 6 s. The shortest window
 * still holds three scrapes: a scrape may take its whole interval on a busy machine
 * (the worker reads its gauges from Postgres), so the interval is not shorter.
 */
const TIME_FACTOR = 50;
const SCRAPE_INTERVAL = '2s';
/** Grafana's $__rate_interval: four scrape intervals. */
const RATE_INTERVAL = '8s';
const schema = uniqueSchema('prom_e2e');
const prefix = uniquePrefix('prom-e2e');
const fleetSchema = uniqueSchema('prom_e2e_fleet');
const fleetPrefix = uniquePrefix('prom-e2e-fleet');
const dir = mkdtempSync(join(tmpdir(), 'feedsync-prom-e2e-'));
const sim = useSimulator();
let prometheus: PrometheusServer | undefined;
/** How many processes Prometheus scrapes: each must be up before the queries. */
let targets = 0;

afterAll(async () => {
  await prometheus?.stop();
  await killChildren();
  await dropSchema(schema);
  await deletePrefix(prefix);
  await dropSchema(fleetSchema);
  await deletePrefix(fleetPrefix);
  rmSync(dir, { recursive: true, force: true });
});

async function api(path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await request(`${sim().baseUrl}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(res.statusCode, path).toBe(200);
  return (await res.body.json()) as Record<string, unknown>;
}

/** One value of an instant query that returns a single series, or null. */
async function scalar(expr: string): Promise<number | null> {
  const result = (await prometheus!.query(expr)) ?? [];
  return result.length === 1 ? Number(result[0]!.value[1]) : null;
}

beforeAll(async () => {
  const env = { PATH: process.env.PATH ?? '', ...testEnv({ schema, prefix, baseUrl: sim().baseUrl }) };
  expect((await runCli(['migrate'], env)).code).toBe(0);
  const fleetEnv = {
    PATH: process.env.PATH ?? '',
    ...testEnv({ schema: fleetSchema, prefix: fleetPrefix, baseUrl: sim().baseUrl }),
  };
  expect((await runCli(['migrate'], fleetEnv)).code).toBe(0);
  const [webhookPort, receiverMetrics, workerMetrics, fleetMetrics] = [
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
  ];
  const registration = await api('/webhooks', {
    url: `http://127.0.0.1:${webhookPort}/webhooks`,
    // Not email.sent: those the worker alone stores from the feed, so that its events
    // series exist whichever of the two stores the outcomes first.
    events: ['email.delivered', 'email.bounced', 'email.complained'],
  });
  const { FEED_API_KEY: _key, FEED_BASE_URL: _url, ...receiverEnv } = env;
  spawnNode([CLI, 'serve-webhooks'], {
    ...receiverEnv,
    FEED_SOURCE: SOURCE,
    WEBHOOK_SECRET: String(registration.signing_secret),
    WEBHOOK_PORT: String(webhookPort),
    METRICS_PORT: String(receiverMetrics),
  });
  // No retries inside a run: with the feed failing, each run fails at once and the loop backs off.
  spawnNode([CLI, 'sync', '--watch'], {
    ...env,
    FEED_SOURCE: SOURCE,
    SYNC_INTERVAL_MS: '500',
    FEED_MAX_RETRIES: '0',
    METRICS_PORT: String(workerMetrics),
  });
  const sourcesFile = join(dir, 'sources.json');
  writeFileSync(
    sourcesFile,
    JSON.stringify({
      sources: [
        { source: 'fleet-a', api_key_env: 'FLEET_A_KEY' },
        { source: 'fleet-b', api_key_env: 'FLEET_B_KEY' },
        { source: BROKEN, api_key_file: join(dir, 'missing-key') },
      ],
    }),
  );
  spawnNode([CLI, 'sync', '--watch'], {
    ...fleetEnv,
    FEED_SOURCES_FILE: sourcesFile,
    FLEET_A_KEY: 'sim_test_fleet_a_0123456789',
    FLEET_B_KEY: 'sim_test_fleet_b_0123456789',
    SYNC_INTERVAL_MS: '500',
    FEED_MAX_RETRIES: '0',
    METRICS_PORT: String(fleetMetrics),
  });
  const jobs = {
    'feedsync-worker': [`127.0.0.1:${workerMetrics}`, `127.0.0.1:${fleetMetrics}`],
    'feedsync-webhooks': [`127.0.0.1:${receiverMetrics}`],
  };
  targets = Object.values(jobs).flat().length;
  prometheus = await startPrometheus({
    jobs,
    rules: shortened(ruleSpec(), TIME_FACTOR),
    interval: SCRAPE_INTERVAL,
  });
  // The receiver listening before the first delivery: under load it can start slower than
  // the simulator's first attempts, whose retries then back off past the wait below.
  await waitFor(
    async () => {
      try {
        const res = await request(`http://127.0.0.1:${receiverMetrics}/metrics`);
        await res.body.dump();
        return res.statusCode === 200;
      } catch {
        return false;
      }
    },
    { what: 'the receiver to listen', timeoutMs: 30_000 },
  );
  for (const to of ['delivered@example.com', 'bounced@example.com', 'complained@example.com']) {
    await api('/emails', { from: 'app@example.com', to: [to], subject: 'Hi', html: '<p>Hi</p>' });
  }
  // Every target up, the feed's events read by the worker (stored, or found stored: the
  // receiver, now listening first, often stores an event before the feed serves it), the
  // deliveries answered by the receiver.
  const readByWorker =
    '(sum(feedsync_events_stored_total) or vector(0)) + (sum(feedsync_events_duplicate_total) or vector(0))';
  await waitFor(
    async () =>
      // Every target scraped and up: a target not scraped yet has no `up` series at all.
      (await scalar('count(up{job=~"feedsync-.*"} == 1)')) === targets &&
      ((await scalar(readByWorker)) ?? 0) >= 6 &&
      ((await scalar('sum(feedsync_webhook_requests_total{status="200"})')) ?? 0) >= 3,
    {
      what: 'Prometheus to scrape both processes after the first events',
      timeoutMs: 45_000,
      intervalMs: 250,
    },
  );
}, 90_000);

describe('the alerts and the dashboard on a real Prometheus', () => {
  it('loads every rule of the file and evaluates each without an error', async () => {
    type Rules = { groups: { rules: { name: string; health: string; lastError?: string }[] }[] };
    const loaded = async () => (await prometheus!.api<Rules>('rules')).groups.flatMap((g) => g.rules);
    expect((await loaded()).map((r) => r.name).sort()).toEqual(
      rulesOf(ruleSpec())
        .map((r) => r.alert)
        .sort(),
    );
    // Health is "unknown" until a rule's first evaluation, "err" with the error after a bad one.
    const rules = await waitFor(
      async () => {
        const now = await loaded();
        return now.every((r) => r.health !== 'unknown') ? now : null;
      },
      { what: 'every rule evaluated once', timeoutMs: 10_000 },
    );
    expect(rules.filter((r) => r.health !== 'ok')).toEqual([]);
  });

  it('answers every expression of the dashboard with series, and knows every metric it names', async () => {
    const expressions = expressionsOf(readDashboard());
    const names = new Set(
      (await prometheus!.query('group by (__name__) ({__name__=~"feedsync_.+"})')).map(
        (s) => s.metric.__name__,
      ),
    );
    for (const { title, expr } of expressions) {
      for (const name of metricNamesOf(expr)) expect(names, `${title}: ${name}`).toContain(name);
      // One source chosen, as an operator would, and every source ("All"). A scrape that
      // timed out on a busy machine leaves a gap for a moment, so each query may be asked
      // again; a misspelt metric or label never answers.
      for (const source of [SOURCE, '.*']) {
        const query = interpolate(expr, { source, rateInterval: RATE_INTERVAL });
        await waitFor(async () => (await prometheus!.query(query)).length > 0, {
          what: `series for "${title}": ${query}`,
          timeoutMs: 15_000,
          intervalMs: 500,
        });
      }
    }
  }, 120_000);

  it('names the failing source of a fleet, and counts the fleet by state', async () => {
    const failing = await waitFor(
      async () =>
        (await alertsOf(prometheus!, 'FeedsyncSourceFailing')).find(
          (a) => a.state === 'firing' && a.labels.source === BROKEN,
        ),
      { what: 'FeedsyncSourceFailing to name the broken source', timeoutMs: 45_000, intervalMs: 250 },
    );
    expect(failing.annotations.summary).toMatch(
      /^feedsync source broken: \d+ failed runs \(in 30 minutes, or in a row\)$/,
    );
    expect(await scalar('max(feedsync_sources)')).toBe(3);
    expect(await scalar('max(feedsync_sources_failing)')).toBe(1);
    expect(await scalar('max(feedsync_sources_never_succeeded)')).toBe(1);
    // The fleet's totals carry no source; its per-source series are its worst sources'.
    expect(await scalar('count(feedsync_pages_total{source=""})')).toBe(1);
    const named = (await prometheus!.query('group by (source) (feedsync_run_consecutive_failures)')).map(
      (s) => s.metric.source,
    );
    expect(named).toContain(BROKEN);
    // The healthy ones of the fleet raise nothing.
    expect((await alertsOf(prometheus!, 'FeedsyncSourceFailing')).map((a) => a.labels.source)).toEqual([
      BROKEN,
    ]);
  }, 60_000);

  it('fires the stall alert while the feed answers 503, and resolves it when the feed is back', async () => {
    const stalled = () => alertsOf(prometheus!, 'FeedsyncNoRecentSuccess');
    // Runs catch up every half second: nothing stalls (on a slow machine, not at once).
    await waitFor(async () => (await stalled()).length === 0, {
      what: 'no stall before the fault',
      timeoutMs: 30_000,
      intervalMs: 500,
    });

    sim().setFaults({ rate5xx: 1 });
    const firing = await waitFor(
      async () => (await stalled()).find((a) => a.state === 'firing' && a.labels.source === SOURCE),
      { what: 'FeedsyncNoRecentSuccess to fire', timeoutMs: 60_000, intervalMs: 250 },
    );
    expect(firing.labels.severity).toBe('critical');
    expect(firing.annotations.summary).toBe(
      `feedsync source ${SOURCE} has not caught up with the feed for 15 minutes`,
    );
    expect(firing.annotations.runbook_url).toMatch(/RUNBOOK\.md#feedsyncnorecentsuccess$/);
    // The worker counted its failed runs meanwhile, under the source's name.
    expect(await scalar(`sum(feedsync_run_failures_total{source="${SOURCE}"})`)).toBeGreaterThan(0);
    // The worker counted its failed runs meanwhile.

    sim().setFaults({ rate5xx: 0 });
    await waitFor(async () => (await stalled()).length === 0, {
      what: 'FeedsyncNoRecentSuccess to resolve',
      timeoutMs: 45_000,
      intervalMs: 250,
    });
  }, 150_000);
});
