import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { renderKustomization } from './kustomize.js';

const root = mkdtempSync(join(tmpdir(), 'feedsync-kustomize-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let count = 0;
/** Writes files into a fresh folder and returns its path. */
function folder(files: Record<string, string>): string {
  const dir = join(root, String(count++));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return dir;
}

const KUSTOMIZATION = 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n';
const CONFIG = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  A: "1"\n  B: "2"\n';
const POLICY =
  'apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: p\nspec:\n' +
  '  podSelector: {}\n  egress:\n    - ports: [{port: 53}]\n';

describe('renderKustomization', () => {
  it('loads resources from files and base folders, in order', () => {
    const dir = folder({
      'base/kustomization.yaml': `${KUSTOMIZATION}resources: [config.yaml]\n`,
      'base/config.yaml': CONFIG,
      'top/kustomization.yaml': `${KUSTOMIZATION}resources: [../base, policy.yaml]\n`,
      'top/policy.yaml': POLICY,
    });
    expect(renderKustomization(join(dir, 'top')).map((o) => o.kind)).toEqual(['ConfigMap', 'NetworkPolicy']);
  });

  it('merges maps, replaces lists, removes keys set to null, deletes whole objects', () => {
    const dir = folder({
      'kustomization.yaml': `${KUSTOMIZATION}resources: [all.yaml]\npatches:\n  - path: p1.yaml\n  - path: p2.yaml\n`,
      'all.yaml': `${CONFIG}---\n${POLICY}---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: s\n`,
      'p1.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  A: null\n  C: "3"\n',
      'p2.yaml':
        'apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: p\nspec:\n' +
        '  egress:\n    - ports: [{port: 443}]\n---\napiVersion: v1\nkind: ServiceAccount\n' +
        'metadata:\n  name: s\n$patch: delete\n',
    });
    const [config, policy, ...rest] = renderKustomization(dir);
    expect(config?.data).toEqual({ B: '2', C: '3' });
    expect(policy?.spec).toEqual({ podSelector: {}, egress: [{ ports: [{ port: 443 }] }] });
    expect(rest).toEqual([]);
  });

  it('refuses what it cannot render the way kubectl does', () => {
    const refuse = (files: Record<string, string>, message: RegExp) =>
      expect(() => renderKustomization(folder({ 'c.yaml': CONFIG, ...files }))).toThrow(message);
    refuse({ 'kustomization.yaml': `${KUSTOMIZATION}resources: [c.yaml]\nnamePrefix: x-\n` }, /namePrefix/);
    refuse(
      {
        'kustomization.yaml': `${KUSTOMIZATION}resources: [c.yaml]\npatches:\n  - path: p.yaml\n`,
        'p.yaml': POLICY,
      },
      /no object/,
    );
    refuse({ 'kustomization.yaml': `${KUSTOMIZATION}resources: [c.yaml, c.yaml]\n` }, /defined twice/);
    refuse(
      {
        'kustomization.yaml': `${KUSTOMIZATION}resources: [c.yaml]\npatches:\n  - path: p.yaml\n`,
        'p.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\nspec:\n  ports: []\n',
      },
      /merges this list/,
    );
  });

  it("merges lists keyed by name as kubectl does: the patch's items first, merged by name, then the rest", () => {
    const pod = (spec: string) => `apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n${spec}`;
    const dir = folder({
      'kustomization.yaml': `${KUSTOMIZATION}resources: [pod.yaml]\npatches:\n  - path: p.yaml\n`,
      'pod.yaml': pod(
        '  containers:\n    - name: a\n      image: x\n      env: [{name: A, value: "1"}, {name: C, value: "4"}]\n' +
          '  volumes: [{name: tmp, emptyDir: {}}]\n',
      ),
      'p.yaml': pod(
        '  containers:\n    - name: a\n      env: [{name: B, value: "2"}, {name: A, value: "3"}]\n' +
          '  volumes: [{name: keys, secret: {secretName: k}}]\n',
      ),
    });
    const [rendered] = renderKustomization(dir);
    expect(rendered?.spec).toEqual({
      containers: [
        {
          name: 'a',
          image: 'x',
          env: [
            { name: 'B', value: '2' },
            { name: 'A', value: '3' },
            { name: 'C', value: '4' },
          ],
        },
      ],
      volumes: [
        { name: 'keys', secret: { secretName: 'k' } },
        { name: 'tmp', emptyDir: {} },
      ],
    });
  });
});
