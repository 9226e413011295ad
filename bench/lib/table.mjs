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
