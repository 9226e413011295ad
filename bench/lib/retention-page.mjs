import { pct, rate } from './table.mjs';

const n = (x) => x.toLocaleString('en-US');

/** The rows of the retention table. */
export function retentionRows(r) {
  return [
    {
      measure: `sync --once, ${n(r.events)} events, ${n(r.stored)} old events stored`,
      result: rate(r.alone.eventsPerSec),
    },
    {
      measure: `  the same while EVENTS_RETENTION_DAYS prunes the ${n(r.stored)}`,
      result: rate(r.during.eventsPerSec),
      against: `${n(r.prunedDuringRun)} rows pruned during the run`,
      ratio: pct(r.ratio),
      target: '≥ 80%',
      ok: r.ratio >= 0.8,
    },
    {
      measure: `pruning all ${n(r.stored)} old events (1000 a statement, resting as long)`,
      result: `${Math.round(r.pruned / r.pruneSeconds).toLocaleString('en-US')} rows/s`,
      against: `${Math.round(r.pruneSeconds)} s in all; ${n(r.left)} old left`,
    },
  ];
}

/** The text of the retention section: what was run, the table, the disk a stored event takes. */
export function retentionSection(r, table) {
  const kb = (x) => `${Math.round(x)} B`;
  const { events, email_status: status, outbox } = r.disk;
  return [
    `Measured ${new Date().toISOString().slice(0, 10)} with \`node bench/run.mjs --only retention\`.`,
    '',
    table,
    '',
    `Disk per stored row (pg_total_relation_size: heap, TOAST and indexes, after VACUUM ANALYZE, ${n(r.stored)} rows): ` +
      `events ${kb(events.perRow)}, email_status ${kb(status.perRow)} (one row per email), outbox ${kb(outbox.perRow)} ` +
      '(published rows are kept OUTBOX_RETENTION_HOURS).',
  ].join('\n');
}
