import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatStatus, STATUS_LIST_LIMIT, statusReport } from '../../src/cli/status-report.js';
import type { Publisher } from '../../src/queue/publisher.js';
import type { Store } from '../../src/store/db.js';
import { migratedStore } from '../store/migrated-store.js';
import { testConfig } from '../support/config.js';

/**
 * `status` over 100,000 sources whose rows are written directly, as a fleet's turns
 * leave them: the listing is bounded, worst first, says how many it left out, and the
 * filters keep exactly the sources in their state. (How long it takes is in
 * docs/BENCHMARKS.md: tests assert counts, never speed.)
 */
const SOURCES = 100_000;
/** Sources s00007, s00107, … fail, with 1 … 7 turns in a row. */
const FAILING = Array.from({ length: 7 }, (_, i) => ({ source: name(i * 100 + 7), failures: i + 1 }));
/** Sources whose newest event is 31 … 42 minutes old. */
const LAGGING = Array.from({ length: 12 }, (_, i) => ({ source: name(50_000 + i), minutes: 31 + i }));
/** Sources that never caught up (a cursor without a success). */
const NEVER = [name(99_990), name(99_991), name(99_992)];

function name(i: number): string {
  return `s${String(i).padStart(5, '0')}`;
}

let store: Store;
let dispose: () => Promise<void>;
const noQueues = { counts: async () => ({}) } as unknown as Publisher;

beforeAll(async () => {
  ({ store, dispose } = await migratedStore('status_fleet'));
  const s = store.schema;
  await store.pool.query(
    `INSERT INTO ${s}.cursors (source, after_id, last_success_at)
     SELECT 's' || lpad(i::text, 5, '0'), 'e' || i, now() - interval '1 minute' FROM generate_series(0, $1 - 1) i`,
    [SOURCES],
  );
  await store.pool.query(
    `INSERT INTO ${s}.source_counts (source, events_stored, newest_event_at)
     SELECT 's' || lpad(i::text, 5, '0'), i % 10, now() - interval '2 minutes' FROM generate_series(0, $1 - 1) i`,
    [SOURCES],
  );
  await store.pool.query(
    `INSERT INTO ${s}.leases (source, failures, last_error)
     SELECT source, failures, 'feed down' FROM unnest($1::text[], $2::int[]) AS f(source, failures)`,
    [FAILING.map((f) => f.source), FAILING.map((f) => f.failures)],
  );
  await store.pool.query(
    `UPDATE ${s}.source_counts SET newest_event_at = now() - make_interval(mins => l.minutes)
     FROM unnest($1::text[], $2::int[]) AS l(source, minutes) WHERE source_counts.source = l.source`,
    [LAGGING.map((l) => l.source), LAGGING.map((l) => l.minutes)],
  );
  await store.pool.query(`UPDATE ${s}.cursors SET last_success_at = NULL WHERE source = ANY($1)`, [NEVER]);
}, 120_000);
afterAll(async () => {
  await dispose();
});

describe('status at 100,000 sources', () => {
  // The one source of FEED_SOURCE ("feed", never run) is listed besides the tables' sources.
  const config = () => testConfig({ schema: store.schema, prefix: 'status-fleet' }, { FEED_SOURCE: 'feed' });
  const total = SOURCES + 1;

  it('counts every source by state, lists the 50 worst first, and says how many it left out', async () => {
    const report = await statusReport(config(), store, noQueues);
    expect(report.summary).toEqual({
      sources: total,
      failing: FAILING.length,
      lagging: LAGGING.length,
      neverSucceeded: NEVER.length + 1,
      laggingAfterSeconds: 1800,
    });
    expect(report.sources).toHaveLength(STATUS_LIST_LIMIT);
    expect(report.omitted).toBe(total - STATUS_LIST_LIMIT);
    const listed = report.sources.map((s) => s.source);
    // Failing (most turns in a row first), then lagging (most first), then never caught up, then by name.
    expect(listed.slice(0, 7)).toEqual(FAILING.map((f) => f.source).reverse());
    expect(listed.slice(7, 19)).toEqual(LAGGING.map((l) => l.source).reverse());
    expect(listed.slice(19, 23)).toEqual(['feed', ...NEVER]);
    expect(listed.slice(23, 26)).toEqual([name(0), name(1), name(2)]);
    const worst = report.sources[0]!;
    expect(worst).toMatchObject({ failuresInRow: 7, lastError: 'feed down', eventsStored: 7 });
    expect(report.sources[7]!.lagSeconds).toBeGreaterThanOrEqual(42 * 60);
    expect(formatStatus(report)).toContain(
      'sources 100,001: 7 failing, 12 lagging (newest event over 30 min old), 4 never caught up',
    );
    expect(formatStatus(report)).toContain('… and 99,951 more; --all lists them\n');
  }, 60_000);

  it('--failing and --lagging list exactly the sources in that state, and nothing left out', async () => {
    const failing = await statusReport(config(), store, noQueues, { filter: 'failing' });
    expect(failing.sources.map((s) => [s.source, s.failuresInRow])).toEqual(
      FAILING.map((f) => [f.source, f.failures]).reverse(),
    );
    expect(failing.omitted).toBe(0);
    expect(failing.summary.sources).toBe(total);
    const lagging = await statusReport(config(), store, noQueues, { filter: 'lagging' });
    expect(lagging.sources.map((s) => s.source)).toEqual(LAGGING.map((l) => l.source).reverse());
    expect(formatStatus(lagging)).not.toContain('more;');
    const few = await statusReport(config(), store, noQueues, { filter: 'lagging', limit: 5 });
    expect(few.omitted).toBe(LAGGING.length - 5);
    expect(formatStatus(few)).toContain('… and 7 more; --lagging --all lists them\n');
  }, 60_000);

  it('--all lists every source; --source one alone', async () => {
    const all = await statusReport(config(), store, noQueues, { limit: null });
    expect(all.sources).toHaveLength(total);
    expect(all.omitted).toBe(0);
    const one = await statusReport(config(), store, noQueues, { only: name(4) });
    expect(one.sources.map((s) => [s.source, s.eventsStored])).toEqual([[name(4), 4]]);
    expect(one.summary.sources).toBe(1);
  }, 60_000);
});
