import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testEnv } from '../support/config.js';
import { freePort, killChildren, type RedisServer, runCli, startRedisServer } from '../support/processes.js';
import { clusterJobCount, startLocalCluster } from '../support/redis-topologies.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import { expectExactlyOnce, type Sandbox, useSandboxes } from '../sync/harness.js';

const run = promisify(execFile);
const BACKLOG = 200;
const sim = useSimulator({ backlog: BACKLOG });
// The server and its keys are gone after the file: no keys to delete.
const sandbox = useSandboxes({ redisUrl: () => null });
const certDir = mkdtempSync(join(tmpdir(), 'feedsync-tls-'));
const cert = join(certDir, 'cert.pem');
let redis: RedisServer;
let tlsPort: number;

beforeAll(async () => {
  // A self-signed certificate for 127.0.0.1; the client trusts it through NODE_EXTRA_CA_CERTS.
  await run('openssl', [
    ...['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'],
    ...['-keyout', join(certDir, 'key.pem'), '-out', cert, '-days', '1'],
    ...['-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'],
  ]);
  tlsPort = await freePort();
  // The plain port stays open for the start-up probe; feedsync speaks only TLS, to tlsPort.
  redis = await startRedisServer({
    args: [
      ...['--tls-port', String(tlsPort), '--tls-cert-file', cert, '--tls-key-file', join(certDir, 'key.pem')],
      ...['--tls-ca-cert-file', cert, '--tls-auth-clients', 'no'],
    ],
  });
}, 60_000);
afterAll(async () => {
  await killChildren();
  await redis?.dispose();
  rmSync(certDir, { recursive: true, force: true });
});

function envOf(box: Sandbox, extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    ...testEnv(
      { schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl },
      { REDIS_URL: `rediss://127.0.0.1:${tlsPort}`, ...extra },
    ),
  };
}

describe('Redis over TLS (rediss://)', () => {
  it('sync --once publishes every job over TLS, trusting the server through NODE_EXTRA_CA_CERTS', async () => {
    const box = await sandbox('tls_once');
    const res = await runCli(['sync', '--once'], envOf(box, { NODE_EXTRA_CA_CERTS: cert }), 60_000);
    expect(res.code, res.stderr).toBe(0);
    await expectExactlyOnce({ store: box.store, prefix: box.prefix, expected: BACKLOG, redisUrl: redis.url });
    expect(`${res.stdout}${res.stderr}`).not.toContain(TEST_API_KEY);
  }, 120_000);

  it('doctor: a certificate it cannot verify fails the redis check, saying why', async () => {
    const box = await sandbox('tls_untrusted');
    const res = await runCli(['doctor', '--json'], envOf(box));
    const check = (
      JSON.parse(res.stdout) as { checks: { name: string; status: string; message: string }[] }
    ).checks.find((c) => c.name === 'redis');
    expect(check?.status).toBe('fail');
    expect(check?.message).toMatch(/self.signed certificate/i);
  }, 120_000);

  it('a Redis Cluster over TLS: rediss:// seed nodes, found and published to through the cluster', async () => {
    const box = await sandbox('tls_cluster');
    const prefix = `{${box.prefix}}`;
    const cluster = await startLocalCluster(3, { tls: { cert, key: join(certDir, 'key.pem') } });
    try {
      const env = envOf({ ...box, prefix }, { REDIS_URL: cluster.tlsUrl!, NODE_EXTRA_CA_CERTS: cert });
      const res = await runCli(['sync', '--once'], env, 60_000);
      expect(res.code, res.stderr).toBe(0);
      const { rows } = await box.store.pool.query<{ n: number; open: number }>(
        `SELECT count(*)::int AS n, count(*) FILTER (WHERE published_at IS NULL)::int AS open FROM "${box.schema}".outbox`,
      );
      expect(rows[0]!.open).toBe(0);
      const jobs =
        (await clusterJobCount(cluster, prefix, 'email-events')) +
        (await clusterJobCount(cluster, prefix, 'contact-events'));
      expect(jobs).toBe(rows[0]!.n);
      const doctor = await runCli(['doctor', '--json'], env);
      const redisCheck = (
        JSON.parse(doctor.stdout) as { checks: { name: string; message: string }[] }
      ).checks.find((c) => c.name === 'redis');
      expect(redisCheck?.message).toMatch(/^cluster: a cluster of 3 masters, .* over TLS$/);
    } finally {
      await cluster.dispose();
    }
  }, 180_000);
});
