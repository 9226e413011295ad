import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { ROOT } from '../deploy/manifests.js';

/** The PrometheusRule the repository ships. */
export const RULE_FILE = join(ROOT, 'k8s', 'monitoring', 'prometheus-rule.yaml');
/** The promtool unit tests of its alerts. */
export const PROMTEST_FILE = join(ROOT, 'test', 'monitoring', 'rules.promtest.yaml');

export interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
export interface RuleGroups {
  groups: { name: string; interval?: string; rules: Rule[] }[];
}

/**
 * The PrometheusRule's `spec`: a plain Prometheus rule file. promtool and the
 * Prometheus server read that; the operator's wrapper around it they do not.
 */
export function ruleSpec(): RuleGroups {
  const rule = parse(readFileSync(RULE_FILE, 'utf8')) as { kind: string; spec: RuleGroups };
  if (rule.kind !== 'PrometheusRule') throw new Error(`${RULE_FILE}: not a PrometheusRule`);
  return rule.spec;
}

export function alertsOf(spec: RuleGroups): Rule[] {
  return spec.groups.flatMap((g) => g.rules).filter((r) => r.alert !== undefined);
}

/** Writes rule groups as a rule file. */
export function writeRules(path: string, spec: RuleGroups): void {
  writeFileSync(path, stringify(spec));
}

/** `promtool <args>`, its exit code and output. */
export function promtool(args: readonly string[], cwd: string): { code: number | null; output: string } {
  const run = spawnSync('promtool', args, { cwd, encoding: 'utf8', timeout: 60_000 });
  if (run.error) throw run.error;
  return { code: run.status, output: `${run.stdout}${run.stderr}` };
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** A Prometheus duration (`15m`, `1h30m`) in milliseconds. */
export function durationMs(text: string): number {
  const parts = [...text.matchAll(/(\d+)(ms|s|m|h|d)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== text)
    throw new Error(`not a duration: ${text}`);
  return parts.reduce((sum, p) => sum + Number(p[1]) * UNIT_MS[p[2]!]!, 0);
}

/**
 * The same rules on a faster clock: every `for:` and every range window divided by
 * `factor` (no shorter than `minMs`), so a test sees in seconds what production sees
 * in minutes. Thresholds and expressions are otherwise untouched.
 */
export function shortened(spec: RuleGroups, factor: number, minMs = 1_000): RuleGroups {
  const scale = (d: string): string => `${Math.max(minMs, Math.round(durationMs(d) / factor))}ms`;
  return {
    groups: spec.groups.map((g) => ({
      ...g,
      rules: g.rules.map((r) => ({
        ...r,
        expr: r.expr.replace(/\[([0-9a-z]+)\]/g, (_, d: string) => `[${scale(d)}]`),
        ...(r.for ? { for: scale(r.for) } : {}),
      })),
    })),
  };
}
