import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ROOT } from '../deploy/manifests.js';
import {
  alertsOf,
  PROMTEST_FILE,
  promtool,
  type RuleGroups,
  ruleSpec,
  shortened,
  writeRules,
} from './rules.js';

const dir = mkdtempSync(join(tmpdir(), 'feedsync-rules-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const spec = ruleSpec();
const alerts = alertsOf(spec);

/** GitHub's anchor of a Markdown heading. */
function anchorOf(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^a-z0-9 _-]/g, '')
    .replace(/ /g, '-');
}

describe('k8s/monitoring/prometheus-rule.yaml', () => {
  it('passes promtool check rules', () => {
    const file = join(dir, 'feedsync.rules.yaml');
    writeRules(file, spec);
    const run = promtool(['check', 'rules', file], dir);
    expect(run.output).toContain(`SUCCESS: ${alerts.length} rules found`);
    expect(run.code).toBe(0);
  });

  it('would fail promtool check rules with a broken expression', () => {
    const file = join(dir, 'broken.rules.yaml');
    writeRules(file, {
      groups: [{ name: 'x', rules: [{ alert: 'X', expr: 'rate(feedsync_pages_total[5m]' }] }],
    });
    expect(promtool(['check', 'rules', file], dir).code).not.toBe(0);
  });

  it('gives every alert a severity, a summary, a description and a runbook section of its own', () => {
    expect(alerts.length).toBeGreaterThanOrEqual(15);
    const anchors = new Set<string>();
    for (const rule of alerts) {
      const where = rule.alert;
      expect(['critical', 'warning', 'info'], where).toContain(rule.labels?.severity);
      expect(rule.annotations?.summary, where).toMatch(/\S{3}/);
      expect(rule.annotations?.description, where).toMatch(/\S{3}/);
      const link =
        /^https:\/\/github\.com\/[^/]+\/feedsync\/blob\/main\/(docs\/[A-Z]+\.md)#([a-z0-9-]+)$/.exec(
          rule.annotations?.runbook_url ?? '',
        );
      expect(link, `${where} runbook_url`).not.toBeNull();
      const [, doc, anchor] = link!;
      const headings = readFileSync(join(ROOT, doc!), 'utf8')
        .split('\n')
        .filter((line) => /^#{2,4} /.test(line))
        .map((line) => anchorOf(line.replace(/^#+ /, '')));
      expect(headings, `${where}: ${doc} has no section #${anchor}`).toContain(anchor);
      expect(anchors.has(anchor!), `${where} shares its runbook section`).toBe(false);
      anchors.add(anchor!);
    }
  });

  it('passes its promtool unit tests: each alert fires, and stays silent in a near miss', () => {
    // The summaries are compared as rendered; descriptions and links are static text, checked above.
    const bare: RuleGroups = {
      groups: spec.groups.map((g) => ({
        ...g,
        rules: g.rules.map(({ annotations, ...rule }) => ({
          ...rule,
          ...(annotations?.summary ? { annotations: { summary: annotations.summary } } : {}),
        })),
      })),
    };
    writeRules(join(dir, 'feedsync.rules.yaml'), bare);
    copyFileSync(PROMTEST_FILE, join(dir, 'rules.promtest.yaml'));
    const run = promtool(['test', 'rules', 'rules.promtest.yaml'], dir);
    expect(run.output).toContain('SUCCESS');
    expect(run.code, run.output).toBe(0);
  });

  it('has a unit test that fires and one that stays silent for every alert, and none for an unknown one', () => {
    const tests = (
      parse(readFileSync(PROMTEST_FILE, 'utf8')) as {
        tests: { alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[] }[];
      }
    ).tests.flatMap((t) => t.alert_rule_test ?? []);
    const names = alerts.map((r) => r.alert!);
    for (const name of names) {
      const cases = tests.filter((t) => t.alertname === name);
      expect(
        cases.some((t) => t.exp_alerts.length > 0),
        `${name} never fires`,
      ).toBe(true);
      expect(
        cases.some((t) => t.exp_alerts.length === 0),
        `${name} is never silent`,
      ).toBe(true);
    }
    for (const t of tests) expect(names).toContain(t.alertname);
  });

  it('shortens every window and `for:` for a test clock, and the result still checks', () => {
    const short = shortened(spec, 60);
    const rules = alertsOf(short);
    const lack = rules.find((r) => r.alert === 'FeedsyncNoRecentSuccess')!;
    expect(lack.expr).toContain('[15000ms]');
    expect(lack.for).toBe('5000ms');
    for (const rule of rules) expect(rule.expr).not.toMatch(/\[\d+[mhd]\]/);
    const file = join(dir, 'short.rules.yaml');
    writeRules(file, short);
    expect(promtool(['check', 'rules', file], dir).code).toBe(0);
  });
});
