import { PodMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { CronJob } from 'kubernetes-models/batch/v1/CronJob';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import type { K8sObject } from './kustomize.js';

type ModelClass = new (data: never) => { validate(): void };

/** The kinds our manifests use, by `apiVersion/kind`. Any other kind fails the check. */
const MODELS: Record<string, ModelClass> = {
  'v1/ServiceAccount': ServiceAccount,
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'batch/v1/Job': Job,
  'batch/v1/CronJob': CronJob,
  'apps/v1/Deployment': Deployment,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'v1/Service': Service,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  // The Prometheus Operator's kinds (k8s/monitoring), from its CRDs' schemas.
  'monitoring.coreos.com/v1/PrometheusRule': PrometheusRule,
  'monitoring.coreos.com/v1/PodMonitor': PodMonitor,
};

interface Visit {
  path: string;
  read: Set<string>;
  /** The validator listed the keys itself: a free-form map such as labels or data. */
  enumerated: boolean;
}

/**
 * Validates an object against the Kubernetes API schema shipped by kubernetes-models
 * (throws on a type or enum error), and returns the fields the schema does not know.
 * The schema allows unknown fields, which the API server drops in silence (a pod-level
 * `readOnlyRootFilesystem`, a misspelt `podReplacementPolicy`), so every object is
 * wrapped in a proxy that records which keys the validator reads: a key it never
 * reads is not in the schema.
 */
export function validateStrict(obj: K8sObject): string[] {
  const Model = MODELS[`${obj.apiVersion}/${obj.kind}`];
  if (!Model) throw new Error(`${obj.apiVersion}/${obj.kind}: not a kind these manifests should use`);
  const visits: Array<[object, Visit]> = [];
  const model = new Model(structuredClone(obj) as never);
  const tracked = track(model, `${obj.kind}/${obj.metadata.name}`, visits, true) as { validate(): void };
  tracked.validate();

  const unknown: string[] = [];
  for (const [target, visit] of visits) {
    if (Array.isArray(target) || visit.enumerated) continue;
    for (const key of Object.keys(target)) if (!visit.read.has(key)) unknown.push(`${visit.path}.${key}`);
  }
  return unknown;
}

function track(value: unknown, path: string, visits: Array<[object, Visit]>, inPlace = false): unknown {
  if (typeof value !== 'object' || value === null) return value;
  const source = value as Record<string, unknown>;
  let target: object;
  if (inPlace) {
    // The model instance keeps its prototype (validate lives there); its fields are wrapped.
    for (const key of Object.keys(source)) source[key] = track(source[key], `${path}.${key}`, visits);
    target = source;
  } else if (Array.isArray(value)) {
    target = value.map((item, i) => track(item, `${path}[${i}]`, visits));
  } else {
    target = Object.fromEntries(
      Object.entries(source).map(([key, v]) => [key, track(v, `${path}.${key}`, visits)]),
    );
  }
  const visit: Visit = { path, read: new Set(), enumerated: false };
  visits.push([target, visit]);
  return new Proxy(target, {
    get(t, key, receiver) {
      if (typeof key === 'string') visit.read.add(key);
      return Reflect.get(t, key, receiver);
    },
    has(t, key) {
      if (typeof key === 'string') visit.read.add(key);
      return Reflect.has(t, key);
    },
    ownKeys(t) {
      visit.enumerated = true;
      return Reflect.ownKeys(t);
    },
  });
}
