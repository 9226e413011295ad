import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import type { ICronJob } from 'kubernetes-models/batch/v1/CronJob';
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import type { IConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { describe, expect, it } from 'vitest';
import { one, render } from './manifests.js';

describe('the cronjob overlay', () => {
  const objects = render('cronjob');
  const cron = one<ICronJob>(objects, 'CronJob', 'feedsync').spec!;
  const job = cron.jobTemplate.spec!;
  const config = one<IConfigMap>(objects, 'ConfigMap').data ?? {};

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

  it('runs sync --once with the image entrypoint', () => {
    const pod = job.template.spec!;
    expect(pod.restartPolicy).toBe('Never');
    expect(pod.containers.map((c) => c.args)).toEqual([['sync', '--once']]);
  });

  it('has no Deployment and opens no ingress', () => {
    expect(objects.filter((o) => o.kind === 'Deployment')).toEqual([]);
    expect(one<INetworkPolicy>(objects, 'NetworkPolicy').spec?.ingress).toBeUndefined();
  });
});

describe('the deployment overlay', () => {
  const objects = render('deployment');
  const deployment = one<IDeployment>(objects, 'Deployment', 'feedsync').spec!;
  const pod = deployment.template.spec!;
  const container = pod.containers[0]!;
  const config = one<IConfigMap>(objects, 'ConfigMap').data ?? {};

  it('runs one replica that stops before the next starts', () => {
    expect(deployment.replicas).toBe(1);
    expect(deployment.strategy?.type).toBe('Recreate');
    expect(deployment.template.metadata?.labels).toMatchObject(deployment.selector.matchLabels ?? {});
    expect(pod.containers).toHaveLength(1);
    expect(container.args).toEqual(['sync', '--watch']);
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

  it('opens ingress to the metrics port only', () => {
    const ingress = one<INetworkPolicy>(objects, 'NetworkPolicy').spec?.ingress;
    expect(ingress).toEqual([{ ports: [{ port: 9464, protocol: 'TCP' }] }]);
  });
});
