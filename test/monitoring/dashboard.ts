import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MONITORING_DIR } from '../deploy/manifests.js';

/** The Grafana dashboard the repository ships (the ConfigMap's one file). */
export const DASHBOARD_FILE = join(MONITORING_DIR, 'feedsync-dashboard.json');

export interface Panel {
  type: string;
  id: number;
  title: string;
  gridPos: { h: number; w: number; x: number; y: number };
  datasource?: { type: string; uid: string };
  targets?: { expr: string; refId: string; legendFormat?: string; datasource?: { uid: string } }[];
}

export interface Dashboard {
  uid: string;
  title: string;
  panels: Panel[];
  templating: {
    list: {
      name: string;
      type: string;
      query?: unknown;
      multi?: boolean;
      includeAll?: boolean;
      allValue?: string;
    }[];
  };
}

export function readDashboard(text = readFileSync(DASHBOARD_FILE, 'utf8')): Dashboard {
  return JSON.parse(text) as Dashboard;
}

/** Every PromQL expression of the dashboard's panels, with the panel's title. */
export function expressionsOf(dashboard: Dashboard): { title: string; expr: string }[] {
  return dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ title: p.title, expr: t.expr })));
}

/**
 * An expression as Grafana sends it: the `source` variable replaced by a regex of the
 * chosen sources, `$__rate_interval` by a window of at least four scrapes.
 */
export function interpolate(expr: string, vars: { source: string; rateInterval: string }): string {
  return expr.replaceAll('$source', vars.source).replaceAll('$__rate_interval', vars.rateInterval);
}

/** The feedsync metric names an expression reads (histogram series keep their suffix). */
export function metricNamesOf(expr: string): string[] {
  return [...new Set(expr.match(/\bfeedsync_[a-z_]+\b/g) ?? [])];
}
