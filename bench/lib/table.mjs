/** Formatting of the results table (Markdown, readable in a terminal as well). */

export const rate = (x) => `${Math.round(x).toLocaleString('en-US')} events/s`;
export const mb = (x) => `${Math.round(x)} MB`;
export const ms = (x) => `${Math.round(x)} ms`;
export const pct = (x) => `${Math.round(x * 100)}%`;

/** Rows of {measure, result, against, ratio, target, ok}; `ok` null when there is no target. */
export function markdownTable(rows) {
  const head = ['measure', 'result', 'compared with', 'ratio', 'target', ''];
  const body = rows.map((r) => [
    r.measure,
    r.result,
    r.against ?? '',
    r.ratio ?? '',
    r.target ?? '',
    r.ok === undefined || r.ok === null ? '' : r.ok ? 'met' : 'MISSED',
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((row) => row[i].length)));
  const line = (cells) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => (i === 1 || i === 3 ? `${'-'.repeat(w + 1)}:` : '-'.repeat(w + 2))).join('|')}|`;
  return [line(head), rule, ...body.map(line)].join('\n');
}

/** Rows of {measure, worker, postgres, redis, simulator} in µs per event (null: not measured). */
export function cpuTable(rows) {
  const us = (x) => (x === null || x === undefined ? '' : x.toFixed(1));
  const head = ['CPU per event, µs', 'worker / bench', 'Postgres', 'Redis', 'simulator', 'total'];
  const body = rows.map((r) => {
    const parts = [r.worker, r.postgres, r.redis, r.simulator];
    const total = parts.reduce((a, b) => a + (b ?? 0), 0);
    return [r.measure, ...parts.map(us), us(total)];
  });
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((row) => row[i].length)));
  const line = (cells) =>
    `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => (i === 0 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  return [line(head), rule, ...body.map(line)].join('\n');
}
