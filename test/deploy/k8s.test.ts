import { readFileSync } from 'node:fs';
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import type { IConfigMap } from 'kubernetes-models/v1/ConfigMap';
import type { ISecret } from 'kubernetes-models/v1/Secret';
import type { IServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { VARIABLES } from '../../src/config/fields.js';
import { validateStrict } from './k8s-schema.js';
import { idOf, readYaml } from './kustomize.js';
import {
  hasKubectl,
  manifestFiles,
  OVERLAYS,
  one,
  ROOT,
  render,
  renderWithKubectl,
  sortedById,
} from './manifests.js';
import { podTemplatesOf, restrictedViolations } from './pod-security.js';

const kubectl = hasKubectl();
// The names loadConfig reads (src/config/fields.ts), one a line.
const configSource = VARIABLES.join('\n');

describe.each(OVERLAYS)('the %s overlay', (overlay) => {
  const objects = render(overlay);
  const pods = objects.flatMap(podTemplatesOf);
  const configMap = one<IConfigMap>(objects, 'ConfigMap', 'feedsync-config');
  const secret = one<ISecret>(objects, 'Secret', 'feedsync-secrets');

  it('holds only objects that the API schema accepts, without unknown fields', () => {
    expect(objects.length).toBeGreaterThan(0);
    for (const obj of objects) expect(validateStrict(obj), idOf(obj)).toEqual([]);
  });

  it('renders exactly as kubectl kustomize does', () => {
    expect(kubectl, 'kubectl is not on PATH: install it (.ci/run checks for it)').toBe(true);
    expect(sortedById(render(overlay))).toEqual(sortedById(renderWithKubectl(overlay)));
  });

  it('runs every pod under the restricted Pod Security Standard', () => {
    expect(pods.length).toBeGreaterThanOrEqual(2);
    for (const pod of pods) expect(restrictedViolations(pod.spec), pod.where).toEqual([]);
  });

  it('gives every pod a read-only root, an emptyDir /tmp, resources and time to drain', () => {
    for (const { where, spec } of pods) {
      expect(spec.securityContext, where).toMatchObject({
        runAsNonRoot: true,
        runAsUser: 1000,
        seccompProfile: { type: 'RuntimeDefault' },
      });
      expect(spec.serviceAccountName, where).toBe('feedsync');
      expect(spec.automountServiceAccountToken, where).toBe(false);
      // SIGTERM drains within 30 s; the kill must come after that.
      expect(spec.terminationGracePeriodSeconds, where).toBeGreaterThan(30);
      const tmp = spec.volumes?.find((v) => v.emptyDir !== undefined);
      for (const c of spec.containers) {
        expect(c.securityContext, where).toMatchObject({
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ['ALL'] },
        });
        expect(c.volumeMounts, where).toContainEqual({ name: tmp?.name, mountPath: '/tmp' });
        for (const side of ['requests', 'limits'] as const) {
          expect(Object.keys(c.resources?.[side] ?? {}).sort(), `${where} ${side}`).toEqual([
            'cpu',
            'memory',
          ]);
        }
        // The image's ENTRYPOINT (node dist/bin/feedsync.js) stays; pods choose the command by args.
        expect(c.command, where).toBeUndefined();
        expect(c.image, where).toMatch(/^feedsync:\d+\.\d+\.\d+$/);
      }
    }
  });

  it('mounts the Secret read-only as files that the *_FILE variables name, and the config loads', () => {
    for (const { where, spec } of pods) {
      const volume = spec.volumes?.find((v) => v.secret?.secretName === 'feedsync-secrets');
      expect(volume?.secret?.secretName, where).toBe(secret.metadata?.name);
      const container = spec.containers[0]!;
      expect(container.envFrom, where).toEqual([{ configMapRef: { name: configMap.metadata?.name } }]);
      // A pod's own variables (the receiver's secret file) come on top of the ConfigMap.
      const env = Object.fromEntries((container.env ?? []).map((e) => [e.name, e.value]));
      for (const e of container.env ?? []) {
        expect(e.valueFrom, `${where} ${e.name}`).toBeUndefined();
        // Only file names: a secret itself is never an environment variable.
        if (!e.name.endsWith('_FILE')) expect(e.name).not.toMatch(/KEY|SECRET|PASSWORD|TOKEN|_URL/);
        expect(configSource, `${e.name} is not a variable that loadConfig reads`).toContain(
          e.name.replace(/_FILE$/, ''),
        );
      }
      const mount = container.volumeMounts?.find((m) => m.name === volume?.name);
      expect(mount?.readOnly, where).toBe(true);

      // Every mounted Secret and ConfigMap as the files the pod sees (the sources file and its keys too).
      const files = new Map<string, string>();
      for (const m of container.volumeMounts ?? []) {
        const v = spec.volumes?.find((x) => x.name === m.name);
        const source = v?.secret
          ? (objects.find((o) => o.kind === 'Secret' && o.metadata.name === v.secret?.secretName) as ISecret)
          : v?.configMap
            ? (objects.find(
                (o) => o.kind === 'ConfigMap' && o.metadata.name === v.configMap?.name,
              ) as IConfigMap)
            : undefined;
        expect(source === undefined && (v?.secret || v?.configMap), `${where} mounts ${m.name}`).toBeFalsy();
        const data = source && 'stringData' in source ? source.stringData : source?.data;
        for (const [key, value] of Object.entries(data ?? {})) files.set(`${m.mountPath}/${key}`, value);
        if (v?.secret || v?.configMap) expect(m.readOnly, `${where} ${m.name}`).toBe(true);
      }
      const readFile = (path: string): string => {
        const value = files.get(path);
        if (value === undefined) throw Object.assign(new Error(`no ${path}`), { code: 'ENOENT' });
        return value;
      };
      const config = loadConfig({ ...configMap.data, ...env }, readFile);
      expect(config.feed.apiKey, where).toBe(secret.stringData?.['feed-api-key']);
      expect(config.database.url, where).toBe(secret.stringData?.['database-url']);
      if (config.queues.backend === 'postgres') {
        // No Redis at all: the queues are in the database of DATABASE_URL.
        expect(secret.stringData?.['redis-url'], where).toBeUndefined();
        expect(config.queues.databaseUrl, where).toBe(secret.stringData?.['database-url']);
      } else {
        expect(config.redis.url, where).toBe(secret.stringData?.['redis-url']);
      }
      if (container.args?.[0] === 'serve-webhooks') {
        expect(config.webhooks.secrets, where).toEqual([secret.stringData?.['webhook-secret']]);
      }
    }
  });

  it('keeps secrets out of the ConfigMap and only known variables in it', () => {
    for (const [key, value] of Object.entries(configMap.data ?? {})) {
      if (!key.endsWith('_FILE')) expect(key).not.toMatch(/KEY|SECRET|PASSWORD|TOKEN|DATABASE_URL|REDIS_URL/);
      expect(value, key).not.toMatch(/:\/\/[^/@\s]*:[^/@\s]*@/);
      expect(configSource, `${key} is not a variable that loadConfig reads`).toContain(
        key.replace(/_FILE$/, ''),
      );
    }
  });

  it('ships the Secret as an example with placeholders only', () => {
    for (const s of objects.filter((o) => o.kind === 'Secret') as unknown as ISecret[]) {
      // base64 `data` would hide what is stored; placeholders are plain text.
      expect(s.data).toBeUndefined();
      for (const [key, value] of Object.entries(s.stringData ?? {})) {
        expect(value, key).toContain('REPLACE_ME');
        expect(value.replaceAll('REPLACE_ME', ''), key).not.toMatch(/[A-Za-z0-9+/_-]{24,}/);
        expect(value, key).not.toMatch(/_(live|test)_/);
      }
    }
  });

  it('gives the pods no Kubernetes API token', () => {
    expect(one<IServiceAccount>(objects, 'ServiceAccount').automountServiceAccountToken).toBe(false);
  });

  it('has a NetworkPolicy over every pod allowing egress only to DNS, Postgres, Redis (where used) and HTTPS', () => {
    const policy = one<INetworkPolicy>(objects, 'NetworkPolicy', 'feedsync').spec!;
    expect(policy.policyTypes?.sort()).toEqual(['Egress', 'Ingress']);
    for (const { where, template } of pods) {
      for (const [label, value] of Object.entries(policy.podSelector.matchLabels ?? {})) {
        expect(template.metadata?.labels?.[label], where).toBe(value);
      }
    }
    const egress = (policy.egress ?? []).flatMap((rule) => {
      expect(rule.to, 'egress rules limit ports, to any destination').toBeUndefined();
      return (rule.ports ?? []).map((p) => `${p.port}/${p.protocol}`);
    });
    const redis = configMap.data?.QUEUE_BACKEND === 'postgres' ? [] : ['6379/TCP'];
    expect(egress.sort()).toEqual(['443/TCP', '53/TCP', '53/UDP', '5432/TCP', ...redis]);
  });

  it('runs the migrate Job once, without retrying a configuration error', () => {
    const job = objects.find((o) => o.kind === 'Job' && o.metadata.name === 'feedsync-migrate');
    const [pod] = job ? podTemplatesOf(job) : [];
    expect(pod?.spec.containers[0]?.args).toEqual(['migrate']);
    expect(pod?.spec.restartPolicy).toBe('Never');
    expect(job?.spec).toMatchObject({ podReplacementPolicy: 'Failed', backoffLimit: expect.any(Number) });
  });
});

describe('the manifest files', () => {
  it.each(manifestFiles().map((f) => [f.slice(ROOT.length), f]))(
    '%s reads the same as YAML 1.1 and 1.2',
    (_, f) => {
      // Kubernetes reads YAML 1.1 (0440 is octal there, `on` a boolean); our tools read 1.2.
      expect(readYaml(f, '1.1')).toEqual(readYaml(f, '1.2'));
    },
  );

  it('speak of leases, which a dead replica frees only when they run out, not of advisory locks', () => {
    const stale = manifestFiles().filter((f) =>
      /advisory|frees its sources at once/i.test(readFileSync(f, 'utf8')),
    );
    expect(stale.map((f) => f.slice(ROOT.length))).toEqual([]);
  });
});
