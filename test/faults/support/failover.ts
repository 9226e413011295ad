import type { Sandbox } from './sandbox.js';

/** Outbox rows marked published so far: how far a run's publishing has come. */
export async function publishedRows(box: Sandbox): Promise<number> {
  const { rows } = await box.store.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${box.schema}".outbox WHERE published_at IS NOT NULL`,
  );
  return rows[0]!.n;
}

/** Outbox rows still waiting to be published. */
export async function unpublishedRows(box: Sandbox): Promise<number> {
  const { rows } = await box.store.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${box.schema}".outbox WHERE published_at IS NULL`,
  );
  return rows[0]!.n;
}

/**
 * The relay's failed attempts in a run's log, and how many of its warnings were for want
 * of a replica's acknowledgement. The relay warns once an outage begins and reminds at a
 * bounded rate, each line with the count of failures in a row, and says how many there
 * were when it recovers: the attempts are summed from those counts.
 */
export function relayFailures(log: string): { failures: number; notReplicated: number } {
  const lines = log.split('\n').filter((l) => l.includes('"module":"relay"') && l.includes('"failures":'));
  let failures = 0;
  let streak = 0;
  for (const line of lines) {
    const count = Number(/"failures":(\d+)/.exec(line)?.[1] ?? 0);
    if (line.includes('outbox relay recovered')) {
      failures += count;
      streak = 0;
    } else streak = count;
  }
  return {
    failures: failures + streak,
    notReplicated: lines.filter((l) => l.includes('outbox relay') && l.includes('REDIS_NOT_REPLICATED'))
      .length,
  };
}
