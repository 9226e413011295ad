import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import type { ICronJob } from 'kubernetes-models/batch/v1/CronJob';
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import type { IPodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import type { IConfigMap } from 'kubernetes-models/v1/ConfigMap';
import type { ISecret } from 'kubernetes-models/v1/Secret';
import type { IService } from 'kubernetes-models/v1/Service';
import { describe, expect, it } from 'vitest';
import { one, render } from './manifests.js';
import { podTemplatesOf } from './pod-security.js';

describe('the cronjob overlay', () => {
  const objects = render('cronjob');
  const cron = one<ICronJob>(objects, 'CronJob', 'feedsync').spec!;
  const job = cron.jobTemplate.spec!;
  const config = one<IConfigMap>(objects, 'ConfigMap', 'feedsync-config').data ?? {};

  it('starts one run every 5 minutes, never two at once, and skips a start it missed', () => {
    expect(cron.schedule).toBe('*/5 * * * *');
    expect(cron.concurrencyPolicy).toBe('Forbid');
    // Below the interval: a late start is skipped instead of piling up behind the next.
    expect(cron.startingDeadlineSeconds).toBeGreaterThanOrEqual(10);
    expect(cron.startingDeadlineSeconds).toBeLessThan(300);
    expect(cron.successfulJobsHistoryLimit).toBeGreaterThan(0);
    expect(cron.failedJobsHistoryLimit).toBeGreaterThan(0);
  });

  it('bounds each run and replaces a failed pod only once it is gone', () => {
    expect(job.backoffLimit).toBeGreaterThanOrEqual(0);
    expect(job.podReplacementPolicy).toBe('Failed');
    expect(job.ttlSecondsAfterFinished).toBeGreaterThan(0);
    // A run waiting on a long Retry-After fails itself before the deadline kills it.
    expect(job.activeDeadlineSeconds).toBeGreaterThan(Number(config.FEED_MAX_RETRY_WAIT_MS) / 1000);
  });

  it('does not retry a configuration error (2) or a rejected key (3)', () => {
    const failJob = job.podFailurePolicy?.rules.find((r) => r.action === 'FailJob');
    expect(failJob?.onExitCodes).toMatchObject({ operator: 'In', values: [2, 3] });
  });

  it('ends a run at SYNC_ONCE_MAX_MS minutes inside its deadline, and leaves exit 4 to the next scheduled run', () => {
    const limitS = Number(config.SYNC_ONCE_MAX_MS) / 1000;
    // Time for the last commit, the outbox and the exit before the deadline would kill the run.
    expect(job.activeDeadlineSeconds! - limitS).toBeGreaterThanOrEqual(120);
    const rules = job.podFailurePolicy?.rules.filter((r) => r.action === 'FailJob') ?? [];
    expect(rules.map((r) => r.onExitCodes?.values)).toContainEqual([4]);
  });

  it('runs sync --once with the image entrypoint', () => {
    const pod = job.template.spec!;
    expect(pod.restartPolicy).toBe('Never');
    expect(pod.containers.map((c) => c.args)).toEqual([['sync', '--once']]);
  });

  it('has no Deployment and opens no ingress', () => {
    expect(objects.filter((o) => o.kind === 'Deployment')).toEqual([]);
    expect(one<INetworkPolicy>(objects, 'NetworkPolicy', 'feedsync').spec?.ingress).toBeUndefined();
  });
});

/** The namespaces (by name label) admitted to each port of a policy's ingress rules; never "any pod" or an address block. */
function ingressSources(policy: INetworkPolicy['spec']) {
  return (policy?.ingress ?? []).map((rule) => ({
    from: rule.from?.map((peer) => {
      expect(peer.podSelector).toBeUndefined();
      expect(peer.ipBlock).toBeUndefined();
      return peer.namespaceSelector?.matchLabels?.['kubernetes.io/metadata.name'];
    }),
    ports: rule.ports?.map((p) => `${p.port}/${p.protocol}`),
  }));
}

describe('the deployment overlay', () => {
  const objects = render('deployment');
  const deployment = one<IDeployment>(objects, 'Deployment', 'feedsync').spec!;
  const pod = deployment.template.spec!;
  const container = pod.containers[0]!;
  const config = one<IConfigMap>(objects, 'ConfigMap', 'feedsync-config').data ?? {};

  it('serves one account in one replica that drains before the next starts', () => {
    // One source is paged by one run at a time: a second replica would only wait on its lock.
    expect(deployment.replicas).toBe(1);
    expect(deployment.strategy).toEqual({ type: 'Recreate' });
    expect(deployment.template.metadata?.labels).toMatchObject(deployment.selector.matchLabels ?? {});
    expect(pod.containers).toHaveLength(1);
    expect(container.args).toEqual(['sync', '--watch']);
  });

  it("reads the account's key from feedsync-secrets, as the CronJob does, and no sources file", () => {
    expect(container.envFrom).toEqual([{ configMapRef: { name: 'feedsync-config' } }]);
    expect(container.env ?? []).toEqual([]);
    expect(config.FEED_SOURCE).toBe('default');
    const secrets = pod.volumes?.find((v) => v.secret?.secretName === 'feedsync-secrets');
    const mount = container.volumeMounts?.find((m) => m.name === secrets?.name)?.mountPath;
    expect(config.FEED_API_KEY_FILE).toBe(`${mount}/feed-api-key`);
    // No placeholder accounts for a user with one: no sources file, no second Secret.
    expect(objects.filter((o) => o.metadata.name === 'feedsync-sources')).toEqual([]);
    expect(objects.filter((o) => o.metadata.name === 'feedsync-source-keys')).toEqual([]);
    expect(objects.filter((o) => o.kind === 'PodDisruptionBudget')).toEqual([]);
  });

  it('serves the metrics port that METRICS_PORT names, and probes it', () => {
    expect(container.ports).toEqual([{ name: 'metrics', containerPort: 9464, protocol: 'TCP' }]);
    expect(String(container.ports?.[0]?.containerPort)).toBe(config.METRICS_PORT);
    expect(container.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'metrics' });
    expect(container.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'metrics' });
  });

  it('waits longer than the 30 s drain before killing the pod', () => {
    expect(pod.terminationGracePeriodSeconds).toBe(45);
  });

  it('removes the CronJob, keeps the migrate Job', () => {
    expect(objects.filter((o) => o.kind === 'CronJob')).toEqual([]);
    expect(objects.filter((o) => o.kind === 'Job').map((o) => o.metadata.name)).toEqual(['feedsync-migrate']);
  });

  it("admits only Prometheus's namespace, to the metrics port only, as the webhooks overlay does", () => {
    const policy = one<INetworkPolicy>(objects, 'NetworkPolicy', 'feedsync').spec;
    expect(ingressSources(policy)).toEqual([{ from: ['monitoring'], ports: ['9464/TCP'] }]);
  });
});

describe('the many-accounts overlay', () => {
  const objects = render('many-accounts');
  const deployment = one<IDeployment>(objects, 'Deployment', 'feedsync').spec!;
  const pod = deployment.template.spec!;
  const container = pod.containers[0]!;

  it('runs three replicas that share the sources, rolling one at a time, spread over nodes', () => {
    expect(deployment.replicas).toBe(3);
    // The source locks make an overlap of old and new pods safe.
    expect(deployment.strategy).toEqual({
      type: 'RollingUpdate',
      rollingUpdate: { maxUnavailable: 1, maxSurge: 1 },
    });
    expect(deployment.template.metadata?.labels).toMatchObject(deployment.selector.matchLabels ?? {});
    expect(pod.topologySpreadConstraints?.[0]?.labelSelector?.matchLabels).toEqual(
      deployment.selector.matchLabels,
    );
    expect(pod.containers).toHaveLength(1);
    expect(container.args).toEqual(['sync', '--watch']);
  });

  it('reads the sources file from a ConfigMap and one key file per source from a Secret', () => {
    const mountOf = (volume: string) => container.volumeMounts?.find((m) => m.name === volume)?.mountPath;
    const sourcesVolume = pod.volumes?.find((v) => v.configMap?.name === 'feedsync-sources');
    const keysVolume = pod.volumes?.find((v) => v.secret?.secretName === 'feedsync-source-keys');
    const env = Object.fromEntries((container.env ?? []).map((e) => [e.name, e.value]));
    expect(env.FEED_SOURCES_FILE).toBe(`${mountOf(sourcesVolume!.name)}/sources.json`);
    const file = one<IConfigMap>(objects, 'ConfigMap', 'feedsync-sources').data!['sources.json']!;
    const keys = one<ISecret>(objects, 'Secret', 'feedsync-source-keys').stringData ?? {};
    const sources = (JSON.parse(file) as { sources: { source: string; api_key_file: string }[] }).sources;
    expect(sources.length).toBeGreaterThanOrEqual(2);
    // One file per source, named after it, and no key left over.
    expect(sources.map((s) => s.api_key_file)).toEqual(
      sources.map((s) => `${mountOf(keysVolume!.name)}/${s.source}`),
    );
    expect(Object.keys(keys).sort()).toEqual(sources.map((s) => s.source).sort());
    // The one-account mounts stay: the Secret for the database and Redis, and /tmp.
    expect(container.volumeMounts?.map((m) => m.name).sort()).toEqual(
      ['secrets', 'source-keys', 'sources', 'tmp'].sort(),
    );
  });

  it('has requests sized for SYNC_CONCURRENCY and a PodDisruptionBudget that lets one replica go at a time', () => {
    const env = Object.fromEntries((container.env ?? []).map((e) => [e.name, e.value]));
    expect(Number(env.SYNC_CONCURRENCY)).toBe(4);
    // About an eighth of a core per source in flight, and the ten-in-flight peak RSS (about 140 MB) with room.
    expect(container.resources?.requests).toEqual({ cpu: '500m', memory: '192Mi' });
    expect(container.resources?.limits).toEqual({ cpu: '1', memory: '384Mi' });
    const budget = one<IPodDisruptionBudget>(objects, 'PodDisruptionBudget', 'feedsync').spec!;
    expect(budget.maxUnavailable).toBe(1);
    expect(budget.selector?.matchLabels).toEqual(deployment.selector.matchLabels);
  });

  it("keeps the deployment overlay's probes, CronJob removal and metrics rule", () => {
    expect(container.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'metrics' });
    expect(objects.filter((o) => o.kind === 'CronJob')).toEqual([]);
    const policy = one<INetworkPolicy>(objects, 'NetworkPolicy', 'feedsync').spec;
    expect(ingressSources(policy)).toEqual([{ from: ['monitoring'], ports: ['9464/TCP'] }]);
  });
});

describe('the webhooks overlay', () => {
  const objects = render('webhooks');
  const deployment = one<IDeployment>(objects, 'Deployment', 'feedsync-webhooks');
  const pod = deployment.spec!.template;
  const container = pod.spec!.containers[0]!;
  const podLabels = pod.metadata?.labels ?? {};
  const selects = (selector: Record<string, string> | undefined, labels: Record<string, string>) =>
    Object.keys(selector ?? {}).length > 0 &&
    Object.entries(selector ?? {}).every(([key, value]) => labels[key] === value);

  it('runs serve-webhooks in two replicas that roll without ever dropping to none', () => {
    expect(deployment.spec?.replicas).toBe(2);
    expect(deployment.spec?.strategy).toEqual({
      type: 'RollingUpdate',
      rollingUpdate: { maxUnavailable: 0, maxSurge: 1 },
    });
    expect(selects(deployment.spec?.selector.matchLabels, podLabels)).toBe(true);
    expect(container.args).toEqual(['serve-webhooks']);
    expect(container.ports).toEqual([
      { name: 'webhooks', containerPort: 8080, protocol: 'TCP' },
      { name: 'metrics', containerPort: 9464, protocol: 'TCP' },
    ]);
    expect(container.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'webhooks' });
    expect(container.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'webhooks' });
  });

  it('keeps the CronJob beside it: the feed fills what a delivery missed', () => {
    expect(objects.filter((o) => o.kind === 'CronJob').map((o) => o.metadata.name)).toEqual(['feedsync']);
    // Only the receiver's pods carry its component label, so its Service and policy reach no other pod.
    const others = objects
      .filter((o) => o !== (deployment as unknown))
      .flatMap((o) => podTemplatesOf(o).map((p) => p.template.metadata?.labels ?? {}));
    expect(others.length).toBeGreaterThan(0);
    for (const labels of others) expect(labels['app.kubernetes.io/component']).not.toBe('webhooks');
  });

  it('has a Service on the webhook port and a PodDisruptionBudget that keeps one replica up', () => {
    const service = one<IService>(objects, 'Service', 'feedsync-webhooks').spec!;
    expect(selects(service.selector, podLabels)).toBe(true);
    expect(service.ports).toEqual([
      { name: 'webhooks', port: 8080, targetPort: 'webhooks', protocol: 'TCP' },
    ]);
    const budget = one<IPodDisruptionBudget>(objects, 'PodDisruptionBudget', 'feedsync-webhooks').spec!;
    expect(budget.minAvailable).toBe(1);
    expect(budget.minAvailable).toBeLessThan(deployment.spec!.replicas!);
    expect(selects(budget.selector?.matchLabels, podLabels)).toBe(true);
  });

  it("admits only the ingress controller's namespace to the webhook port, and Prometheus's to metrics", () => {
    const policy = one<INetworkPolicy>(objects, 'NetworkPolicy', 'feedsync-webhooks').spec!;
    expect(selects(policy.podSelector.matchLabels, podLabels)).toBe(true);
    expect(policy.policyTypes).toEqual(['Ingress']);
    const rules = ingressSources(policy);
    expect(rules).toEqual([
      { from: ['ingress-nginx'], ports: ['8080/TCP'] },
      { from: ['monitoring'], ports: ['9464/TCP'] },
    ]);
    // The base policy still limits the receiver's egress and opens no ingress.
    const base = one<INetworkPolicy>(objects, 'NetworkPolicy', 'feedsync').spec!;
    expect(selects(base.podSelector.matchLabels, podLabels)).toBe(true);
    expect(base.ingress).toBeUndefined();
  });

  it('pauses before SIGTERM and gives the drain its time', () => {
    expect(container.lifecycle?.preStop?.exec?.command).toEqual(['sleep', '5']);
    // 5 s pause + 20 s for requests in flight + 5 s to publish, with room.
    expect(pod.spec?.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(40);
  });
});

describe('the postgres-queues overlay', () => {
  it('runs with the queues in Postgres and names no Redis anywhere', () => {
    const objects = render('postgres-queues');
    const config = one<IConfigMap>(objects, 'ConfigMap', 'feedsync-config');
    expect(config.data).toMatchObject({ QUEUE_BACKEND: 'postgres', QUEUE_PREFIX: 'feedsync_queues' });
    expect(JSON.stringify(objects)).not.toMatch(/redis|6379/i);
  });
});

describe('the verify overlay', () => {
  const objects = render('verify');
  const verify = one<ICronJob>(objects, 'CronJob', 'feedsync-verify').spec!;
  const job = verify.jobTemplate.spec!;

  it('keeps the sync CronJob and adds one verify a night, never two at once', () => {
    expect(one<ICronJob>(objects, 'CronJob', 'feedsync').spec?.schedule).toBe('*/5 * * * *');
    expect(verify.schedule).toMatch(/^\d+ \d+ \* \* \*$/);
    expect(verify.concurrencyPolicy).toBe('Forbid');
    expect(job.template.spec?.containers.map((c) => c.args)).toEqual([['verify']]);
  });

  it('fails the Job without a retry on a finding (3) or a configuration error (2)', () => {
    const failJob = job.podFailurePolicy?.rules.find((r) => r.action === 'FailJob');
    expect(failJob?.onExitCodes).toMatchObject({ operator: 'In', values: [2, 3] });
    expect(job.activeDeadlineSeconds).toBeGreaterThan(0);
  });

  it('runs where the base NetworkPolicy reaches: the same pod labels', () => {
    const labels = job.template.metadata?.labels ?? {};
    const policy = one<INetworkPolicy>(objects, 'NetworkPolicy', 'feedsync').spec!;
    expect(labels).toMatchObject(policy.podSelector.matchLabels ?? {});
  });
});
