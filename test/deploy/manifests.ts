import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { idOf, type K8sObject, renderKustomization } from './kustomize.js';

/** The repository root, with a trailing slash. */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The overlays users apply: one per mode, many accounts, the webhook receiver beside the
 * CronJob, the queues in Postgres, and the nightly verify beside the CronJob.
 */
export const OVERLAYS = [
  'cronjob',
  'deployment',
  'many-accounts',
  'webhooks',
  'postgres-queues',
  'verify',
] as const;
export type Overlay = (typeof OVERLAYS)[number];

/** The directory of an overlay. */
export function overlayDir(overlay: Overlay): string {
  return join(ROOT, 'k8s', 'overlays', overlay);
}

/** An overlay rendered by our own renderer, in resource order. */
export function render(overlay: Overlay): K8sObject[] {
  return renderKustomization(overlayDir(overlay));
}

/** The one object of a kind (and name); fails when there is none or several. */
export function one<T>(objects: readonly K8sObject[], kind: string, name?: string): T {
  const found = objects.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  if (found.length !== 1) throw new Error(`expected one ${kind} ${name ?? ''}, found ${found.length}`);
  return found[0] as unknown as T;
}

/** Objects sorted by identity, so two renderings compare regardless of order. */
export function sortedById(objects: readonly K8sObject[]): K8sObject[] {
  return [...objects].sort((a, b) => idOf(a).localeCompare(idOf(b)));
}

/** True when `kubectl` is on PATH; it is optional, the tests run without it. */
export function hasKubectl(): boolean {
  const probe = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8', timeout: 30_000 });
  return probe.status === 0;
}

/** k8s/monitoring: the PrometheusRule, the PodMonitors and the dashboard's ConfigMap. */
export const MONITORING_DIR = join(ROOT, 'k8s', 'monitoring');

/** A kustomization (an overlay, or a directory) rendered by `kubectl kustomize` (only call when hasKubectl()). */
export function renderWithKubectl(overlay: Overlay | string): K8sObject[] {
  const dir = (OVERLAYS as readonly string[]).includes(overlay) ? overlayDir(overlay as Overlay) : overlay;
  const run = spawnSync('kubectl', ['kustomize', dir], { encoding: 'utf8', timeout: 60_000 });
  if (run.status !== 0) throw new Error(`kubectl kustomize ${overlay}: ${run.stderr}`);
  return parseAllDocuments(run.stdout as string)
    .map((doc) => doc.toJS() as K8sObject | null)
    .filter((obj): obj is K8sObject => obj !== null);
}

/** Every YAML file under k8s/, as paths. */
export function manifestFiles(): string[] {
  const dir = join(ROOT, 'k8s');
  return readdirSync(dir, { recursive: true })
    .map(String)
    .filter((file) => file.endsWith('.yaml') || file.endsWith('.yml'))
    .map((file) => join(dir, file))
    .sort();
}
