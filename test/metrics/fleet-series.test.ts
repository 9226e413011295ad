import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { dbGauges } from '../../src/metrics/db-gauges.js';
import { WORST_PER_LIST } from '../../src/metrics/fleet-gauges.js';
import { createMetrics, type Metrics } from '../../src/metrics/metrics.js';
import { startHealthServer } from '../../src/metrics/server.js';
import { nothingApplied } from '../../src/store/applier.js';
import type { Store } from '../../src/store/db.js';
import { migratedStore } from '../store/migrated-store.js';
import { parseMetrics, type Sample, sampleOf } from '../support/prom-text.js';

/**
 * The worker's /metrics at 100,000 sources, scraped over HTTP: the metrics module gets
 * every source's outcomes (commits, feed answers, retries, leases, runs, failures) and
 * reads its gauges from a schema with 100,000 sources' rows. The series stay a small
 * constant; the worst sources are named, and chosen again at every scrape.
 */
const SOURCES = 100_000;
const names = Array.from({ length: SOURCES }, (_, i) => `s${String(i).padStart(5, '0')}`);
/** The target of DESIGN section 6. */
const MAX_SERIES = 2_000;

let store: Store;
let dispose: () => Promise<void>;
beforeAll(async () => {
  ({ store, dispose } = await migratedStore('fleet_series'));
  const s = store.schema;
  // Every source caught up a minute ago, its newest event two minutes old; a few never did.
  await store.pool.query(
    `INSERT INTO ${s}.cursors (source, after_id, last_success_at)
     SELECT n, 'e1', CASE WHEN n LIKE 's9999%' THEN NULL ELSE now() - interval '1 minute' END FROM unnest($1::text[]) n`,
    [names],
  );
  await store.pool.query(
    `INSERT INTO ${s}.source_counts (source, events_stored, newest_event_at)
     SELECT n, 3, now() - interval '2 minutes' FROM unnest($1::text[]) n`,
    [names],
  );
  await store.pool.query(`INSERT INTO ${s}.leases (source) SELECT unnest($1::text[])`, [names]);
}, 120_000);
afterAll(async () => {
  await dispose();
});

async function scrape(metrics: Metrics): Promise<Sample[]> {
  const server = await startHealthServer({
    port: 0,
    host: '127.0.0.1',
    registry: metrics.registry,
    logger: createLogger({ level: 'silent' }),
  });
  try {
    const res = await request(`http://127.0.0.1:${server.port}/metrics`);
    expect(res.statusCode).toBe(200);
    return parseMetrics(await res.body.text());
  } finally {
    await server.close();
  }
}

/** Every source's turn as the scheduler reports it: held, a page committed, feed answers, a run. */
function driveTurns(metrics: Metrics, failing: ReadonlySet<string>): void {
  const inserted = ['email.sent', 'email.delivered', 'contact.subscribed', 'x.new'].map((type, i) => ({
    id: `e${i}`,
    type,
    created_at: '2024-05-01T00:00:00Z',
    data: {},
  }));
  for (const [i, source] of names.entries()) {
    const hooks = metrics.hooksFor(source);
    hooks.onLeaseChange(true);
    hooks.onFeedResponse({ status: [200, 200, 429, 503, 0][i % 5]!, seconds: (i % 100) / 10 });
    if (i % 7 === 0) hooks.onRetry();
    hooks.onCommit({
      pages: 1,
      result: {
        ...nothingApplied(),
        inserted,
        duplicates: i % 3,
        quarantined: i % 1000 === 0 ? 1 : 0,
        conflicts: 0,
      },
    });
    hooks.onPublished('email-events', 2);
    hooks.onPublishDelay(0.01);
    if (failing.has(source)) metrics.observeFailure(source);
    else
      metrics.observeRun(source, {
        status: i % 5000 === 0 ? 'lease-lost' : 'caught-up',
        durationMs: 40,
        failed: false,
      });
    hooks.onLeaseChange(false);
  }
}

/** The failures in a row of these sources, as their turns leave them in the lease rows. */
async function setFailures(failures: ReadonlyMap<string, number>): Promise<void> {
  await store.pool.query(
    `UPDATE ${store.schema}.leases SET failures = 0, last_error = NULL WHERE failures > 0`,
  );
  await store.pool.query(
    `UPDATE ${store.schema}.leases l SET failures = f.n, last_error = 'feed down'
     FROM unnest($1::text[], $2::int[]) AS f(source, n) WHERE l.source = f.source`,
    [[...failures.keys()], [...failures.values()]],
  );
}

const bySource = (samples: readonly Sample[], name: string): string[] =>
  samples
    .filter((s) => s.name === name)
    .map((s) => s.labels.source!)
    .sort();

describe('/metrics of a fleet', () => {
  it(`has at most ${MAX_SERIES} series at ${SOURCES.toLocaleString('en-US')} sources, and names the worst`, async () => {
    const metrics = createMetrics(dbGauges(store, names, 30_000), names);
    const firstFailing = new Map(names.slice(20_000, 20_025).map((n, i) => [n, i + 1]));
    await setFailures(firstFailing);
    driveTurns(metrics, new Set(firstFailing.keys()));
    // One lagging source: its newest event an hour old.
    await store.pool.query(
      `UPDATE ${store.schema}.source_counts SET newest_event_at = now() - interval '1 hour' WHERE source = 's04242'`,
    );
    metrics.hooksFor('s00001').onLeaseChange(true);

    const samples = await scrape(metrics);
    expect(samples.length).toBeLessThanOrEqual(MAX_SERIES);
    // No series carries a source but the worst (at most three lists of them) and the one held now.
    const named = new Set(samples.flatMap((s) => (s.labels.source === undefined ? [] : [s.labels.source])));
    expect(named.size).toBeLessThanOrEqual(3 * WORST_PER_LIST + 1);
    // The counts of the whole fleet.
    expect(sampleOf(samples, 'feedsync_sources')).toBe(SOURCES);
    expect(sampleOf(samples, 'feedsync_sources_failing')).toBe(25);
    expect(sampleOf(samples, 'feedsync_sources_lagging')).toBe(1);
    expect(sampleOf(samples, 'feedsync_sources_never_succeeded')).toBe(10);
    // The failing ones named, most failures in a row first: the ten worst of 25.
    expect(bySource(samples, 'feedsync_run_consecutive_failures').filter((s) => firstFailing.has(s))).toEqual(
      names.slice(20_015, 20_025),
    );
    expect(sampleOf(samples, 'feedsync_run_consecutive_failures', { source: 's20024' })).toBe(25);
    expect(sampleOf(samples, 'feedsync_cursor_lag_seconds', { source: 's04242' })).toBeGreaterThanOrEqual(
      3600,
    );
    expect(bySource(samples, 'feedsync_source_held')).toEqual(['s00001']);
    // Totals without a source: every turn counted.
    expect(sampleOf(samples, 'feedsync_pages_total')).toBe(SOURCES);
    expect(sampleOf(samples, 'feedsync_run_failures_total')).toBe(25);
    expect(sampleOf(samples, 'feedsync_run_duration_seconds_count')).toBe(SOURCES - 25);
    expect(sampleOf(samples, 'feedsync_feed_request_duration_seconds_count', { status: '429' })).toBe(
      SOURCES / 5,
    );
    expect(sampleOf(samples, 'feedsync_events_stored_total', { type: 'other' })).toBe(SOURCES);

    // Other sources fail now, the first ones recovered: the next scrape names the new ones only.
    const nowFailing = new Map(names.slice(70_000, 70_003).map((n) => [n, 4]));
    await setFailures(nowFailing);
    driveTurns(metrics, new Set(nowFailing.keys()));
    metrics.hooksFor('s00001').onLeaseChange(false);
    const after = await scrape(metrics);
    expect(after.length).toBeLessThanOrEqual(MAX_SERIES);
    const failingNamed = after
      .filter((s) => s.name === 'feedsync_run_consecutive_failures' && s.value > 0)
      .map((s) => s.labels.source);
    expect(failingNamed.sort()).toEqual([...nowFailing.keys()]);
    expect(bySource(after, 'feedsync_run_consecutive_failures').some((s) => firstFailing.has(s))).toBe(false);
    expect(sampleOf(after, 'feedsync_sources_failing')).toBe(3);
    expect(bySource(after, 'feedsync_source_held')).toEqual([]);
  }, 120_000);
});

describe('/metrics of one source', () => {
  it('keeps the series of one source as they were: every name, its labels, its number of series', async () => {
    const metrics = createMetrics(dbGauges(store, ['s00003'], 30_000), ['s00003']);
    const hooks = metrics.hooksFor('s00003');
    const inserted = [{ id: 'a', type: 'email.sent', created_at: '2024-01-01T00:00:00Z', data: {} }];
    hooks.onCommit({
      pages: 2,
      result: { ...nothingApplied(), inserted, duplicates: 1, quarantined: 1, conflicts: 1 },
    });
    hooks.onFeedResponse({ status: 200, seconds: 0.1 });
    hooks.onFeedResponse({ status: 429, seconds: 0.1 });
    hooks.onRetry();
    hooks.onPublished('email-events', 1);
    hooks.onPublishDelay(0.01);
    hooks.onLeaseChange(true);
    hooks.onLeaseChange(false);
    metrics.observeRun('s00003', { status: 'caught-up', durationMs: 10, failed: false });
    metrics.observeRun('s00003', { status: 'lease-lost', durationMs: 10, failed: false });
    metrics.observeFailure('s00003');
    await store.pool.query(`INSERT INTO ${store.schema}.events (source, id, type, created_at, data, received_via)
      VALUES ('s00003', 'e1', 'email.sent', now() - interval '5 minutes', '{}', 'feed')`);

    const shape = new Map<string, number>();
    for (const s of await scrape(metrics)) {
      expect(s.labels.source ?? 's00003', s.name).toBe('s00003');
      const key = `${s.name}{${Object.keys(s.labels)
        .filter((k) => k !== 'le')
        .sort()
        .join(',')}}`;
      shape.set(key, (shape.get(key) ?? 0) + 1);
    }
    // As the release before fleets had them (and the counts of no source since).
    expect([...shape].sort()).toEqual([
      ['feedsync_budget_wait_seconds_total{}', 1],
      ['feedsync_contact_events_without_email_total{}', 1],
      ['feedsync_cursor_lag_seconds{source}', 1],
      ['feedsync_events_conflict_total{source}', 1],
      ['feedsync_events_duplicate_total{source}', 1],
      ['feedsync_events_quarantined_total{source}', 1],
      ['feedsync_events_stored_total{source,type}', 1],
      ['feedsync_feed_request_duration_seconds_bucket{source,status}', 24],
      ['feedsync_feed_request_duration_seconds_count{source,status}', 2],
      ['feedsync_feed_request_duration_seconds_sum{source,status}', 2],
      ['feedsync_feed_retries_total{source}', 1],
      ['feedsync_jobs_published_total{queue}', 1],
      ['feedsync_last_success_timestamp_seconds{source}', 1],
      ['feedsync_lease_lost_total{source}', 1],
      ['feedsync_outbox_backlog{}', 1],
      ['feedsync_pages_total{source}', 1],
      ['feedsync_publish_delay_seconds_bucket{}', 15],
      ['feedsync_publish_delay_seconds_count{}', 1],
      ['feedsync_publish_delay_seconds_sum{}', 1],
      ['feedsync_rate_limited_total{}', 1],
      ['feedsync_run_consecutive_failures{source}', 1],
      ['feedsync_run_duration_seconds_bucket{source}', 10],
      ['feedsync_run_duration_seconds_count{source}', 1],
      ['feedsync_run_duration_seconds_sum{source}', 1],
      ['feedsync_run_failures_total{source}', 1],
      ['feedsync_source_held{source}', 1],
      ['feedsync_sources_overdue{}', 1],
    ]);
  });
});
