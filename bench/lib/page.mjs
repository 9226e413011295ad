import { existsSync, readFileSync, writeFileSync } from 'node:fs';

const BEGIN = '<!-- bench:begin (written by `npm run bench`; edits inside are overwritten) -->';
const END = '<!-- bench:end -->';

/** The measured part of docs/BENCHMARKS.md. */
export function measuredSection({ machine, table, cpuTable, sizes, totalSeconds, fillSeconds }) {
  return [
    BEGIN,
    '',
    `Measured ${new Date().toISOString().slice(0, 10)} with \`npm run bench\` (${Math.round(totalSeconds)} s in all).`,
    '',
    `- Machine: ${machine.cpu}, ${machine.memory}; load average at the start ${machine.loadAtStart}`,
    `- Software: Node ${machine.node}; ${machine.postgres}; ${machine.redis}`,
    `- Sizes: ceilings ${sizes.ceiling.toLocaleString('en-US')} events each; end to end ${sizes.endToEnd.toLocaleString('en-US')}; ` +
      `latency runs ${sizes.latency.toLocaleString('en-US')}; memory ${sizes.memory.toLocaleString('en-US')}; ` +
      `grown store ${sizes.stored.toLocaleString('en-US')} events (filled in ${Math.round(fillSeconds)} s)`,
    '',
    table,
    '',
    cpuTable,
    '',
    END,
  ].join('\n');
}

/** Replaces the measured part of the page, keeping the text around it; a page without one gets it appended. */
export function writeMeasured(file, section) {
  const page = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmarks\n';
  const from = page.indexOf(BEGIN);
  const to = page.indexOf(END);
  const next =
    from >= 0 && to > from
      ? `${page.slice(0, from)}${section}${page.slice(to + END.length)}`
      : `${page.trimEnd()}\n\n${section}\n`;
  writeFileSync(file, next);
}

/**
 * Replaces the block `name` of the page (between `<!-- bench:name:begin -->` and
 * `<!-- bench:name:end -->`), a section that runs alone (`--only name`) and so is
 * kept apart from the main table; a page without the block gets it appended.
 */
export function writeBlock(file, name, text) {
  const begin = `<!-- bench:${name}:begin (written by \`npm run bench\` and \`--only ${name}\`; edits inside are overwritten) -->`;
  const end = `<!-- bench:${name}:end -->`;
  const page = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmarks\n';
  const from = page.indexOf(`<!-- bench:${name}:begin`);
  const to = page.indexOf(end);
  const block = `${begin}\n\n${text}\n\n${end}`;
  const next =
    from >= 0 && to > from
      ? `${page.slice(0, from)}${block}${page.slice(to + end.length)}`
      : `${page.trimEnd()}\n\n${block}\n`;
  writeFileSync(file, next);
}
