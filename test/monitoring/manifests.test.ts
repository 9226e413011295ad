import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { IPodMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor';
import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import type { IConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { describe, expect, it } from 'vitest';
import { validateStrict } from '../deploy/k8s-schema.js';
import { idOf, renderKustomization } from '../deploy/kustomize.js';
import {
  hasKubectl,
  MONITORING_DIR,
  one,
  ROOT,
  render,
  renderWithKubectl,
  sortedById,
} from '../deploy/manifests.js';
import { DASHBOARD_FILE, expressionsOf, metricNamesOf, readDashboard } from './dashboard.js';
import { alertsOf, ruleSpec } from './rules.js';

const objects = renderKustomization(MONITORING_DIR);
const dashboard = readDashboard();
const expressions = expressionsOf(dashboard);

/** Every metric the code registers, with the series names a histogram adds. */
function definedMetrics(): Set<string> {
  const names = new Set<string>();
  const dir = join(ROOT, 'src');
  for (const file of readdirSync(dir, { recursive: true }).map(String)) {
    if (!file.endsWith('.ts')) continue;
    const text = readFileSync(join(dir, file), 'utf8');
    for (const m of text.matchAll(/new (Counter|Gauge|Histogram)\(\{\s*name: '(feedsync_[a-z_]+)'/g)) {
      const [, kind, name] = m;
      names.add(name!);
      if (kind === 'Histogram') for (const suffix of ['_bucket', '_count', '_sum']) names.add(name! + suffix);
    }
  }
  return names;
}

describe('k8s/monitoring', () => {
  it('holds a PrometheusRule, two PodMonitors and the dashboard ConfigMap, valid against their schemas', () => {
    expect(objects.map(idOf).sort()).toEqual(
      [
        'monitoring.coreos.com/PodMonitor//feedsync-webhooks',
        'monitoring.coreos.com/PodMonitor//feedsync-worker',
        'monitoring.coreos.com/PrometheusRule//feedsync',
        '/ConfigMap//feedsync-dashboard',
      ].sort(),
    );
    for (const obj of objects) expect(validateStrict(obj), idOf(obj)).toEqual([]);
  });

  it('renders exactly as kubectl kustomize does', () => {
    expect(hasKubectl(), 'kubectl is not on PATH: install it (.ci/run checks for it)').toBe(true);
    expect(sortedById(objects)).toEqual(sortedById(renderWithKubectl(MONITORING_DIR)));
  });

  it("ships the dashboard file in a ConfigMap that Grafana's sidecar picks up", () => {
    const config = one<IConfigMap>(objects, 'ConfigMap', 'feedsync-dashboard');
    expect(config.metadata?.labels?.grafana_dashboard).toBe('1');
    expect(config.data).toEqual({ 'feedsync-dashboard.json': readFileSync(DASHBOARD_FILE, 'utf8') });
  });

  it('scrapes the worker and the receiver on the port their pods name metrics', () => {
    for (const [overlay, name, monitor] of [
      ['deployment', 'feedsync', 'feedsync-worker'],
      ['webhooks', 'feedsync-webhooks', 'feedsync-webhooks'],
    ] as const) {
      const pod = one<IDeployment>(render(overlay), 'Deployment', name).spec!.template;
      const spec = one<IPodMonitor>(objects, 'PodMonitor', monitor).spec;
      for (const [key, value] of Object.entries(spec.selector.matchLabels ?? {})) {
        expect(pod.metadata?.labels?.[key], `${monitor} ${key}`).toBe(value);
      }
      const ports = pod.spec!.containers.flatMap((c) => c.ports ?? []).map((p) => p.name);
      for (const endpoint of spec.podMetricsEndpoints ?? []) expect(ports).toContain(endpoint.port);
    }
  });

  it('reads only metrics that the code defines, in the dashboard and in the alerts', () => {
    const defined = definedMetrics();
    expect(defined.size).toBeGreaterThan(10);
    const used = [...expressions.map((e) => e.expr), ...alertsOf(ruleSpec()).map((r) => r.expr)];
    for (const expr of used) {
      for (const name of metricNamesOf(expr)) expect(defined, `${name} in ${expr}`).toContain(name);
    }
  });
});

describe('the Grafana dashboard', () => {
  it('has a source variable over every source, several at once', () => {
    const source = dashboard.templating.list.find((v) => v.name === 'source');
    expect(source).toMatchObject({ type: 'query', multi: true, includeAll: true, allValue: '.*' });
    expect(JSON.stringify(source?.query)).toContain(
      'label_values(feedsync_last_success_timestamp_seconds, source)',
    );
    expect(dashboard.templating.list.find((v) => v.name === 'datasource')?.type).toBe('datasource');
  });

  it('has a panel for each thing an operator looks at', () => {
    const panelReading = (pattern: RegExp) =>
      expressions.filter((e) => pattern.test(e.expr)).map((e) => e.title);
    const topics: Record<string, RegExp> = {
      'events by type': /by \(type\) \(rate\(feedsync_events_stored_total/,
      lag: /feedsync_cursor_lag_seconds/,
      backlog: /feedsync_outbox_backlog/,
      'jobs published': /feedsync_jobs_published_total/,
      'feed latency':
        /histogram_quantile\(0\.95, sum by \(le\) \(rate\(feedsync_feed_request_duration_seconds_bucket/,
      'feed status codes': /by \(status\) \(rate\(feedsync_feed_request_duration_seconds_count/,
      retries: /feedsync_feed_retries_total/,
      quarantine: /feedsync_events_quarantined_total/,
      'run durations': /feedsync_run_duration_seconds_bucket/,
      "receiver's answers": /by \(status\) \(rate\(feedsync_webhook_requests_total/,
      'signature failures': /by \(reason\) \(rate\(feedsync_webhook_signature_failures_total/,
      'commit latency': /feedsync_webhook_commit_duration_seconds_bucket/,
    };
    for (const [topic, pattern] of Object.entries(topics))
      expect(panelReading(pattern), topic).not.toEqual([]);
  });

  it('filters by the source variable wherever a metric has the label, through the chosen data source', () => {
    // Grafana's own placeholder syntax, not a JavaScript template.
    const chosen = ['$', '{datasource}'].join('');
    for (const panel of dashboard.panels.filter((p) => p.type !== 'row')) {
      expect(panel.datasource?.uid, panel.title).toBe(chosen);
      for (const target of panel.targets ?? []) expect(target.datasource?.uid, panel.title).toBe(chosen);
    }
    const bySource = expressions.filter((e) => /source=~"\$source"/.test(e.expr));
    expect(bySource.length).toBeGreaterThan(expressions.length / 2);
  });

  it('lays out panels in a 24-column grid without overlaps, with unique ids', () => {
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const cells = new Set<string>();
    for (const { title, gridPos: g } of dashboard.panels) {
      expect(g.x + g.w, title).toBeLessThanOrEqual(24);
      for (let x = g.x; x < g.x + g.w; x++) {
        for (let y = g.y; y < g.y + g.h; y++) {
          expect(cells.has(`${x},${y}`), `${title} overlaps at ${x},${y}`).toBe(false);
          cells.add(`${x},${y}`);
        }
      }
    }
  });
});
