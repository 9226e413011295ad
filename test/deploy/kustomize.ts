import { existsSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';

/** A Kubernetes object as rendered: the fields every kind has, the rest left open. */
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  [field: string]: unknown;
}

/** The only kustomization fields this renderer knows; any other one is refused, not ignored. */
const SUPPORTED_FIELDS = new Set(['apiVersion', 'kind', 'resources', 'patches', 'configMapGenerator']);

/**
 * Lists that kubectl's strategic merge combines item by item. Those keyed by `name`
 * are merged here as kubectl does (the patch's items first, in its order, each merged
 * into the item of the same name; then the other items); the others are refused
 * rather than rendered differently from kubectl.
 */
const LISTS_BY_NAME = new Set([
  'containers',
  'initContainers',
  'ephemeralContainers',
  'volumes',
  'volumeMounts',
  'env',
  'imagePullSecrets',
]);
const OTHER_MERGED_LISTS = new Set(['ports', 'finalizers']);

/**
 * Renders a kustomization directory the way `kubectl kustomize` does, for the subset
 * our manifests use: `resources` (files and directories) and `patches` given by
 * `path`, each a strategic-merge patch (maps merge, lists replace, `null` removes a
 * key) or a whole-object `$patch: delete`; and `configMapGenerator` from files, without
 * the name's hash suffix. Objects keep resource order; generated ones come after.
 */
export function renderKustomization(dir: string): K8sObject[] {
  const file = ['kustomization.yaml', 'kustomization.yml', 'Kustomization']
    .map((name) => join(dir, name))
    .find((path) => existsSync(path));
  if (!file) throw new Error(`${dir}: no kustomization file`);
  const [kustomization] = readYaml(file) as Record<string, unknown>[];
  if (kustomization?.kind !== 'Kustomization') throw new Error(`${file}: not a Kustomization`);
  for (const field of Object.keys(kustomization)) {
    if (!SUPPORTED_FIELDS.has(field)) throw new Error(`${file}: field "${field}" is not supported here`);
  }

  const objects: K8sObject[] = [];
  for (const entry of stringList(kustomization.resources, file)) {
    const path = resolve(dir, entry);
    const loaded = statSync(path).isDirectory() ? renderKustomization(path) : readObjects(path);
    for (const obj of loaded) {
      if (objects.some((o) => idOf(o) === idOf(obj)))
        throw new Error(`${path}: ${idOf(obj)} is defined twice`);
      objects.push(obj);
    }
  }

  for (const generated of generateConfigMaps(kustomization.configMapGenerator, dir, file)) {
    if (objects.some((o) => idOf(o) === idOf(generated)))
      throw new Error(`${file}: ${idOf(generated)} is defined twice`);
    objects.push(generated);
  }

  for (const patch of (kustomization.patches ?? []) as Record<string, unknown>[]) {
    const extra = Object.keys(patch).filter((key) => key !== 'path');
    if (extra.length > 0 || typeof patch.path !== 'string') {
      throw new Error(
        `${file}: only patches given by "path" are supported (saw ${Object.keys(patch).join(', ')})`,
      );
    }
    for (const doc of readObjects(resolve(dir, patch.path))) applyPatch(objects, doc, patch.path);
  }
  return objects;
}

/** `group/kind/namespace/name`, the identity kustomize matches patches on. */
export function idOf(obj: K8sObject): string {
  const group = obj.apiVersion.includes('/') ? obj.apiVersion.split('/')[0] : '';
  return `${group}/${obj.kind}/${obj.metadata.namespace ?? ''}/${obj.metadata.name}`;
}

/** Every document of a YAML file, parsed as YAML 1.2; empty documents are skipped. */
export function readYaml(path: string, version: '1.1' | '1.2' = '1.2'): unknown[] {
  const docs = parseAllDocuments(readFileSync(path, 'utf8'), { version });
  if (!Array.isArray(docs)) return [];
  return docs
    .map((doc) => {
      if (doc.errors.length > 0) throw new Error(`${path}: ${doc.errors[0]?.message}`);
      return doc.toJS() as unknown;
    })
    .filter((value) => value !== null && value !== undefined);
}

function readObjects(path: string): K8sObject[] {
  return readYaml(path).map((value) => {
    const obj = value as K8sObject;
    if (typeof obj.apiVersion !== 'string' || typeof obj.kind !== 'string' || !obj.metadata?.name) {
      throw new Error(`${path}: a document without apiVersion, kind or metadata.name`);
    }
    return obj;
  });
}

/**
 * ConfigMaps from `configMapGenerator` entries: `name`, `files` (`path` or `key=path`)
 * and `options` with `disableNameSuffixHash: true` and `labels`. The hash suffix is
 * refused rather than computed: a name that changes with the content breaks the
 * references of anyone who does not use kustomize's name rewriting.
 */
function generateConfigMaps(entries: unknown, dir: string, file: string): K8sObject[] {
  return ((entries ?? []) as Record<string, unknown>[]).map((entry) => {
    const extra = Object.keys(entry).filter((key) => !['name', 'files', 'options'].includes(key));
    const options = (entry.options ?? {}) as Record<string, unknown>;
    const extraOptions = Object.keys(options).filter((k) => !['disableNameSuffixHash', 'labels'].includes(k));
    if (typeof entry.name !== 'string' || extra.length > 0 || extraOptions.length > 0) {
      throw new Error(`${file}: configMapGenerator supports name, files and options (labels) only`);
    }
    if (options.disableNameSuffixHash !== true) {
      throw new Error(`${file}: configMapGenerator ${entry.name} needs options.disableNameSuffixHash: true`);
    }
    const data: Record<string, string> = {};
    for (const spec of stringList(entry.files, file)) {
      const [key, path] = spec.includes('=') ? spec.split('=', 2) : [spec.split('/').pop()!, spec];
      data[key!] = readFileSync(resolve(dir, path!), 'utf8');
    }
    const labels = options.labels as Record<string, string> | undefined;
    return {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: entry.name, ...(labels ? { labels } : {}) },
      data,
    };
  });
}

function applyPatch(objects: K8sObject[], patch: K8sObject, path: string): void {
  const index = objects.findIndex((o) => idOf(o) === idOf(patch));
  if (index < 0) throw new Error(`${path}: no object ${idOf(patch)} to patch`);
  const { $patch: directive, ...rest } = patch as K8sObject & { $patch?: unknown };
  if (directive === 'delete') {
    objects.splice(index, 1);
    return;
  }
  if (directive !== undefined) throw new Error(`${path}: $patch: ${String(directive)} is not supported`);
  objects[index] = merge(objects[index], rest, idOf(patch)) as K8sObject;
}

function merge(target: unknown, patch: unknown, where: string): unknown {
  if (!isMap(patch)) return structuredClone(patch);
  const out: Record<string, unknown> = isMap(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (key.startsWith('$')) throw new Error(`${where}: directive ${key} is not supported`);
    if (value === null) {
      delete out[key];
      continue;
    }
    if (Array.isArray(value) && LISTS_BY_NAME.has(key)) {
      out[key] = mergeByName(out[key], value, `${where}.${key}`);
      continue;
    }
    if (Array.isArray(value) && OTHER_MERGED_LISTS.has(key)) {
      throw new Error(`${where}.${key}: kubectl merges this list by key; patch it another way`);
    }
    out[key] = merge(out[key], value, `${where}.${key}`);
  }
  return out;
}

function mergeByName(target: unknown, patch: unknown[], where: string): unknown[] {
  const nameOf = (item: unknown) => {
    if (!isMap(item) || typeof item.name !== 'string') throw new Error(`${where}: an item has no name`);
    return item.name;
  };
  const existing = new Map((Array.isArray(target) ? target : []).map((item) => [nameOf(item), item]));
  const patched = patch.map((item) => {
    const name = nameOf(item);
    const old = existing.get(name);
    existing.delete(name);
    return old === undefined ? structuredClone(item) : merge(old, item, `${where}[${name}]`);
  });
  return [...patched, ...existing.values()];
}

function isMap(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function stringList(value: unknown, file: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) {
    throw new Error(`${file}: resources must be a list of paths`);
  }
  return value;
}
