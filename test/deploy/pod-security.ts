import type { IContainer } from 'kubernetes-models/v1/Container';
import type { IPodSpec } from 'kubernetes-models/v1/PodSpec';
import type { IPodTemplateSpec } from 'kubernetes-models/v1/PodTemplateSpec';
import type { K8sObject } from './kustomize.js';

/** A pod template found in a workload, with where it was found. */
export interface PodTemplate {
  where: string;
  template: IPodTemplateSpec;
  spec: IPodSpec;
}

/** The pod templates of Jobs, CronJobs and Deployments; other kinds have none. */
export function podTemplatesOf(obj: K8sObject): PodTemplate[] {
  const spec = obj.spec as Record<string, unknown> | undefined;
  let template: unknown;
  if (obj.kind === 'Job' || obj.kind === 'Deployment') template = spec?.template;
  else if (obj.kind === 'CronJob') {
    template = ((spec?.jobTemplate as Record<string, unknown> | undefined)?.spec as Record<string, unknown>)
      ?.template;
  } else return [];
  const t = template as IPodTemplateSpec | undefined;
  if (!t?.spec) throw new Error(`${obj.kind}/${obj.metadata.name}: no pod template`);
  return [{ where: `${obj.kind}/${obj.metadata.name}`, template: t, spec: t.spec }];
}

/** Volume types the "restricted" profile allows. */
const RESTRICTED_VOLUMES = [
  'configMap',
  'csi',
  'downwardAPI',
  'emptyDir',
  'ephemeral',
  'persistentVolumeClaim',
  'projected',
  'secret',
];

/**
 * What keeps a pod spec out of the Pod Security Standards "restricted" profile
 * (which includes "baseline"), as the admission controller checks it; empty when
 * the pod would be admitted in a namespace that enforces `restricted`.
 */
export function restrictedViolations(spec: IPodSpec): string[] {
  const problems: string[] = [];
  const pod = spec.securityContext ?? {};
  if (spec.hostNetwork || spec.hostPID || spec.hostIPC) problems.push('host namespaces');
  if (pod.runAsUser === 0) problems.push('pod runAsUser 0');
  if (pod.seLinuxOptions?.user || pod.seLinuxOptions?.role) problems.push('pod SELinux user or role');
  if (pod.sysctls?.length) problems.push('sysctls');
  for (const volume of spec.volumes ?? []) {
    const types = Object.keys(volume).filter((key) => key !== 'name');
    for (const type of types) if (!RESTRICTED_VOLUMES.includes(type)) problems.push(`volume type ${type}`);
  }

  const containers: IContainer[] = [...(spec.initContainers ?? []), ...spec.containers];
  for (const c of containers) {
    const sc = c.securityContext ?? {};
    const at = `container ${c.name}`;
    if (sc.privileged) problems.push(`${at}: privileged`);
    if (sc.allowPrivilegeEscalation !== false) problems.push(`${at}: allowPrivilegeEscalation not false`);
    if (!(sc.runAsNonRoot ?? pod.runAsNonRoot) || sc.runAsNonRoot === false) {
      problems.push(`${at}: runAsNonRoot not true`);
    }
    if (sc.runAsUser === 0) problems.push(`${at}: runAsUser 0`);
    const seccomp = sc.seccompProfile?.type ?? pod.seccompProfile?.type;
    if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost') problems.push(`${at}: seccomp ${seccomp}`);
    if (!sc.capabilities?.drop?.includes('ALL')) problems.push(`${at}: capabilities not dropping ALL`);
    for (const cap of sc.capabilities?.add ?? []) {
      if (cap !== 'NET_BIND_SERVICE') problems.push(`${at}: adds capability ${cap}`);
    }
    if (sc.procMount && sc.procMount !== 'Default') problems.push(`${at}: procMount ${sc.procMount}`);
    if (sc.seLinuxOptions?.user || sc.seLinuxOptions?.role) problems.push(`${at}: SELinux user or role`);
    for (const port of c.ports ?? []) if (port.hostPort) problems.push(`${at}: hostPort ${port.hostPort}`);
  }
  return problems;
}
