import { existsSync, readFileSync } from 'node:fs';
import type { FaultRecord } from './results.js';

/** Where a fault run kept its queues: `npm run test:faults`, or `npm run test:faults:postgres`. */
export type Backend = 'redis' | 'postgres';

export const BACKENDS: readonly Backend[] = ['redis', 'postgres'];

/** What the page says a run measured on, as it prints it. */
export interface RunFacts {
  /** The day of the run, YYYY-MM-DD. */
  date: string;
  /** CPUs and memory: "2 CPUs (AMD EPYC), 23.5 GiB memory". */
  machine: string;
  /** The versions the run drove: "Node 20.20.2, PostgreSQL 15.20, Redis 7.0.15". */
  software: string;
}

/** One backend's last complete run: its facts and every item it measured. */
export interface BackendResults {
  facts: RunFacts;
  items: FaultRecord[];
}

/**
 * docs/reliability/results.json: the last complete run of each backend. The two suites run
 * apart, so each run replaces its own entry and the page is drawn from both.
 */
export type ReliabilityData = Partial<Record<Backend, BackendResults>>;

/** The file's data, or none when there is no file yet. */
export function readData(path: string): ReliabilityData {
  return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as ReliabilityData) : {};
}

/** The data with `backend`'s entry replaced by this run; the other backend's entry is kept. */
export function withRun(data: ReliabilityData, backend: Backend, run: BackendResults): ReliabilityData {
  const items = [...run.items].sort((a, b) => a.item - b.item);
  return { ...data, [backend]: { facts: run.facts, items } };
}

/**
 * The file's text: JSON with each figure's [label, value] on one line, so that a new run's
 * diff shows the figures that changed and not the brackets around them.
 */
export function serialize(data: ReliabilityData): string {
  const ordered: ReliabilityData = {};
  for (const b of BACKENDS) if (data[b]) ordered[b] = data[b];
  const text = JSON.stringify(ordered, null, 2).replace(
    /\[\n\s*("(?:[^"\\]|\\.)*"),\n\s*("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)\n\s*\]/g,
    '[$1, $2]',
  );
  return `${text}\n`;
}
