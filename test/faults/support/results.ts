import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { inject } from 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Where each fault test writes what it measured (set by global-setup.ts). */
    faultResultsDir: string;
  }
}

/** What one item of the suite measured. */
export interface FaultRecord {
  /** The item's number on docs/RELIABILITY.md, the same with either queue backend. */
  item: number;
  title: string;
  /** What is claimed under this fault, in one sentence. */
  claim: string;
  /** How the fault was injected, for the reader. */
  method: string;
  /** Faults injected, and of what kind ("SIGKILLs"). */
  injected: number;
  injectedWhat: string;
  /** Distinct events whose fate was checked. */
  checked: number;
  /** Events served but not stored (or not enqueued). */
  lost: number;
  /** Events stored, or jobs added, more than once. */
  duplicated: number;
  /** Further figures, in the order they are shown. */
  figures: [label: string, value: string | number][];
  passed: boolean;
  /** The assertion that failed, when one did. */
  failure?: string;
  durationMs: number;
}

export type Measured = Omit<FaultRecord, 'item' | 'title' | 'claim' | 'method' | 'passed' | 'durationMs'>;

/**
 * Runs one item's test body and writes what it measured, passed or not, so the
 * page shows a failure with its figures instead of hiding it. The body fills in
 * `rec` as it goes and asserts at the end.
 */
export async function measured(
  head: Pick<FaultRecord, 'item' | 'title' | 'claim' | 'method'>,
  body: (rec: Measured) => Promise<void>,
): Promise<void> {
  const rec: Measured = {
    injected: 0,
    injectedWhat: 'faults',
    checked: 0,
    lost: 0,
    duplicated: 0,
    figures: [],
  };
  const started = performance.now();
  let failure: string | undefined;
  // An error nobody handles would end a real worker process: count them as failures too.
  const uncaught: string[] = [];
  const onUncaught = (err: unknown) => uncaught.push(firstLine(err));
  process.on('uncaughtException', onUncaught);
  process.on('unhandledRejection', onUncaught);
  try {
    await body(rec);
    await new Promise((resolve) => setTimeout(resolve, 50));
    if (uncaught.length > 0) {
      rec.figures.push(['errors no handler caught (a worker process would crash)', uncaught.length]);
      throw new Error(`${uncaught.length} errors no handler caught, the first: ${uncaught[0]}`);
    }
  } catch (err) {
    failure = firstLine(err);
    throw err;
  } finally {
    process.off('uncaughtException', onUncaught);
    process.off('unhandledRejection', onUncaught);
    const record: FaultRecord = {
      ...head,
      ...rec,
      passed: failure === undefined,
      ...(failure === undefined ? {} : { failure }),
      durationMs: Math.round(performance.now() - started),
    };
    // Named by title too: two items given one number both show in the run's summary.
    const slug = head.title.replace(/[^a-z0-9]+/gi, '-').slice(0, 60);
    writeFileSync(
      join(inject('faultResultsDir'), `item-${head.item}-${slug}.json`),
      JSON.stringify(record, null, 2),
    );
  }
}

function firstLine(err: unknown): string {
  return ((err as Error)?.message ?? String(err)).split('\n')[0] ?? 'unknown error';
}
