import { describe, expect, it } from 'vitest';
import { type BackendResults, type ReliabilityData, serialize, withRun } from './reliability-data.js';
import { renderPage } from './reliability-page.js';
import type { FaultRecord } from './results.js';

function record(item: number, over: Partial<FaultRecord> = {}): FaultRecord {
  return {
    item,
    title: `fault ${item}`,
    claim: `claim ${item}`,
    method: `method ${item}`,
    injected: 10,
    injectedWhat: 'SIGKILLs',
    checked: 1000,
    lost: 0,
    duplicated: 0,
    figures: [['jobs in BullMQ', 1000]],
    passed: true,
    durationMs: 12_000,
    ...over,
  };
}

const facts = (date: string, software: string) => ({
  date,
  machine: '2 CPUs (AMD EPYC), 23.5 GiB memory',
  software,
});

const redisRun: BackendResults = {
  facts: facts('2026-11-28', 'Node 20.20.2, PostgreSQL 15.20, Redis 7.0.15'),
  items: [record(1, { figures: [['jobs in Redis', 1000]] }), record(2, { checked: 2222 })],
};
const postgresRun: BackendResults = {
  facts: facts('2026-11-29', 'Node 20.20.2, PostgreSQL 15.20, BullMQ 6.7.0'),
  items: [record(1, { checked: 3333, figures: [['jobs in the queues schema', 3333]] })],
};

/** The row of a markdown table that starts with these cells. */
function row(page: string, section: string, first: string): string[] {
  const part =
    section === '' ? page.slice(0, page.indexOf('\n## ')) : page.slice(page.indexOf(`\n## ${section}\n`));
  const line = part.split('\n').find((l) => l.startsWith(`| ${first} |`));
  if (!line) throw new Error(`no row ${first} in ${section || 'the summary'}`);
  return line.split(' | ').map((c) => c.replace(/^\| | \|$/g, ''));
}

describe('docs/RELIABILITY.md from both backends', () => {
  it("a run of one backend replaces its own entry and keeps the other's", () => {
    const before: ReliabilityData = { redis: redisRun, postgres: postgresRun };
    const rerun: BackendResults = {
      facts: facts('2026-12-01', postgresRun.facts.software),
      items: [record(1, { checked: 4444, passed: false, failure: '1 event lost' })],
    };
    const after = withRun(before, 'postgres', rerun);
    expect(after.redis).toEqual(redisRun);
    expect(after.postgres?.items[0]?.checked).toBe(4444);

    const page = renderPage(after);
    // Redis column: the earlier run's figures; Postgres column: the new run's, failed.
    expect(row(page, '', '1')).toEqual([
      '1',
      '[fault 1](#1-fault-1)',
      '10 SIGKILLs',
      '1,000',
      '0',
      '0',
      'pass',
      '10 SIGKILLs',
      '4,444',
      '0',
      '0',
      '**FAIL**',
    ]);
    expect(row(page, '1. fault 1', 'result')).toEqual(['result', 'pass', '**FAIL**: 1 event lost']);
    expect(page).toContain('- Measured: 2026-11-28 (queues in Redis); 2026-12-01 (queues in Postgres)');
    expect(page).toContain('- Machine: 2 CPUs (AMD EPYC), 23.5 GiB memory\n');
  });

  it('an item or a figure only one backend has shows a dash for the other', () => {
    const page = renderPage({ redis: redisRun, postgres: postgresRun });
    expect(row(page, '', '2').slice(7)).toEqual(['—', '—', '—', '—', 'not run']);
    expect(row(page, '2. fault 2', 'events checked')).toEqual(['events checked', '2,222', '—']);
    expect(row(page, '2. fault 2', 'result')).toEqual(['result', 'pass', 'not run']);
    // Figures matched by label, each in its own backend's column.
    expect(row(page, '1. fault 1', 'jobs in Redis')).toEqual(['jobs in Redis', '1,000', '—']);
    expect(row(page, '1. fault 1', 'jobs in the queues schema')).toEqual([
      'jobs in the queues schema',
      '—',
      '3,333',
    ]);
    expect(row(page, '1. fault 1', 'duration')).toEqual(['duration', '12 s', '12 s']);
    // The claim once when both say it alike.
    expect(page.match(/claim 1/g)).toHaveLength(1);
  });

  it('a backend not measured yet leaves its column empty', () => {
    const page = renderPage({ postgres: postgresRun });
    expect(row(page, '', '1').slice(2, 7)).toEqual(['—', '—', '—', '—', 'not run']);
    expect(page).toContain('- Not measured yet with the queues in Redis');
  });

  it('the data file reads back as written, a figure on a line', () => {
    const data = withRun({}, 'redis', redisRun);
    const text = serialize(data);
    expect(JSON.parse(text)).toEqual(data);
    expect(text).toContain('["jobs in Redis", 1000]');
  });
});
