import { readFileSync } from 'node:fs';
import { request } from 'undici';
import { signWebhookPayload } from '../../../src/webhooks/signature.js';
import { CLI, freePort, type RunningChild, spawnNode, waitFor } from '../../support/processes.js';
import type { Sandbox } from './sandbox.js';

/** `feedsync serve-webhooks` run as the built CLI with plain `node`, on a sandbox. */
export interface ReceiverChild {
  child: RunningChild;
  port: number;
  metricsPort: number;
}

export async function startReceiverChild(box: Sandbox, secret: string): Promise<ReceiverChild> {
  const [port, metricsPort] = [await freePort(), await freePort()];
  const child = spawnNode(
    [CLI, 'serve-webhooks'],
    box.env(null, { WEBHOOK_SECRET: secret, WEBHOOK_PORT: String(port), METRICS_PORT: String(metricsPort) }),
  );
  await waitFor(
    async () =>
      (await request(`http://127.0.0.1:${port}/healthz`).then(
        (r) => r.body.dump().then(() => r.statusCode),
        () => 0,
      )) === 200,
    { timeoutMs: 30_000, what: 'serve-webhooks to listen' },
  );
  return { child, port, metricsPort };
}

/**
 * Posts one signed delivery of a fresh `email.delivered` event with this id, once (no
 * retry): the answer's status (0 for none) and how long it took.
 */
export async function deliverSigned(
  port: number,
  id: string,
  secret: string,
): Promise<{ status: number; ms: number }> {
  const body = JSON.stringify({
    id,
    type: 'email.delivered',
    created_at: new Date().toISOString(),
    data: { email_id: `em_${id}`, to: ['a@example.com'] },
  });
  const started = performance.now();
  const res = await request(`http://127.0.0.1:${port}/webhooks`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'service-signature': signWebhookPayload(body, secret, Math.floor(Date.now() / 1000)),
    },
    body,
  }).catch(() => null);
  await res?.body.dump();
  return { status: res?.statusCode ?? 0, ms: Math.round(performance.now() - started) };
}

/** A figure of /proc/<pid>/status, in MB. */
export function memoryMb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'));
  return Math.round(Number(line?.[1] ?? 0) / 1024);
}

/** The sum of the samples of /metrics that `pattern` matches (its first group is the value). */
export async function metricSum(port: number, pattern: RegExp): Promise<number> {
  const res = await request(`http://127.0.0.1:${port}/metrics`);
  const text = await res.body.text();
  return [...text.matchAll(pattern)].reduce((sum, m) => sum + Number(m[1]), 0);
}

/** `feedsync_webhook_refused_total` for one reason. */
export function refusedFor(metricsPort: number, reason: string): Promise<number> {
  return metricSum(
    metricsPort,
    new RegExp(`^feedsync_webhook_refused_total\\{[^}]*reason="${reason}"[^}]*\\} (\\d+)$`, 'gm'),
  );
}

/** The memory limit of the serve-webhooks container in k8s/overlays/webhooks, in MiB. */
export function receiverMemoryLimitMb(): number {
  const manifest = readFileSync(
    new URL('../../../k8s/overlays/webhooks/deployment.yaml', import.meta.url),
    'utf8',
  );
  const limit = manifest.match(/limits:\s*\n(?:\s+cpu: .*\n)?\s+memory: (\d+)Mi/);
  if (!limit) throw new Error('no memory limit in k8s/overlays/webhooks/deployment.yaml');
  return Number(limit[1]);
}

/** Which of `ids` the sandbox stored, and with how many outbox rows each. */
export async function storedIds(box: Sandbox): Promise<Map<string, number>> {
  const { rows } = await box.store.pool.query<{ id: string; n: number }>(
    `SELECT e.id, (SELECT count(*)::int FROM "${box.schema}".outbox o WHERE o.event_id = e.id) AS n
       FROM "${box.schema}".events e`,
  );
  return new Map(rows.map((r) => [r.id, r.n]));
}
