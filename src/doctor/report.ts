/** How one check came out. `skip` means it could not run or does not apply, and is not a problem by itself. */
export type CheckStatus = 'ok' | 'warn' | 'fail' | 'skip';

export interface Check {
  /** Short and stable, for scripts: `postgres`, `schema`, `redis-maxmemory-policy`, … */
  name: string;
  status: CheckStatus;
  /** What was found. */
  message: string;
  /** How to put it right, when it is not ok. */
  fix?: string;
}

export interface DoctorReport {
  /** True only when every check is ok: none warned, failed, or could not run. */
  ok: boolean;
  checks: Check[];
}

export function check(name: string, status: CheckStatus, message: string, fix?: string): Check {
  return fix === undefined ? { name, status, message } : { name, status, message, fix };
}

/** The report as one line per check, and the fix indented below it. */
export function formatReport(report: DoctorReport): string {
  const width = Math.max(...report.checks.map((c) => c.name.length));
  const lines: string[] = [];
  for (const c of report.checks) {
    lines.push(`${c.status.padEnd(4)}  ${c.name.padEnd(width)}  ${c.message}`);
    if (c.fix) lines.push(`${' '.repeat(width + 8)}fix: ${c.fix}`);
  }
  const problems = report.checks.filter((c) => c.status === 'warn' || c.status === 'fail').length;
  const skipped = report.checks.filter((c) => c.status === 'skip').length;
  const notRun = skipped > 0 ? `; ${skipped} check${skipped === 1 ? '' : 's'} could not run` : '';
  lines.push(report.ok ? 'all is well' : `${problems} problem${problems === 1 ? '' : 's'} found${notRun}`);
  return `${lines.join('\n')}\n`;
}
