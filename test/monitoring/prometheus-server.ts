import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { stringify } from 'yaml';
import { freePort, waitFor } from '../support/processes.js';
import type { RuleGroups } from './rules.js';

/** A Prometheus server of the Debian package, started by a test on loopback. */
export interface PrometheusServer {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** GET /api/v1/<path>: the `data` of a successful answer; throws on an error answer. */
  api<T>(path: string, params?: Record<string, string>): Promise<T>;
  /** An instant query's result vector. */
  query(expr: string): Promise<{ metric: Record<string, string>; value: [number, string] }[]>;
  /** What it printed so far (for a failed test's message). */
  log(): string;
  /** SIGTERM by pid, waits for the exit (SIGKILL after 10 s), removes its storage. */
  stop(): Promise<void>;
}

export interface PrometheusOptions {
  /** Scrape jobs: name → `host:port` targets. */
  jobs: Record<string, string[]>;
  rules: RuleGroups;
  /** Scrape and rule evaluation interval. Default 1s. */
  interval?: string;
}

/**
 * Starts `prometheus` (the Debian package's /usr/bin/prometheus) on a free loopback
 * port with its storage in a temporary folder, scraping `jobs` and evaluating `rules`,
 * and waits until it is ready.
 */
export async function startPrometheus(opts: PrometheusOptions): Promise<PrometheusServer> {
  const dir = mkdtempSync(join(tmpdir(), 'feedsync-prometheus-'));
  const interval = opts.interval ?? '1s';
  writeFileSync(join(dir, 'rules.yaml'), stringify(opts.rules));
  writeFileSync(
    join(dir, 'prometheus.yml'),
    stringify({
      global: { scrape_interval: interval, evaluation_interval: interval, scrape_timeout: interval },
      rule_files: ['rules.yaml'],
      scrape_configs: Object.entries(opts.jobs).map(([job, targets]) => ({
        job_name: job,
        static_configs: [{ targets }],
      })),
    }),
  );
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child: ChildProcess = spawn(
    'prometheus',
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  const collect = (chunk: Buffer): void => {
    output = (output + chunk.toString()).slice(-20_000);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));

  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(killer);
    rmSync(dir, { recursive: true, force: true });
  };

  const api = async <T>(path: string, params: Record<string, string> = {}): Promise<T> => {
    const res = await request(`${url}/api/v1/${path}?${new URLSearchParams(params)}`);
    const body = (await res.body.json()) as { status: string; data: T; error?: string };
    if (body.status !== 'success') throw new Error(`${path}: ${body.error ?? res.statusCode}`);
    return body.data;
  };

  try {
    await waitFor(
      async () => {
        if (child.exitCode !== null) throw new Error(`prometheus exited (${child.exitCode}):\n${output}`);
        const res = await request(`${url}/-/ready`).catch(() => null);
        await res?.body.dump();
        return res?.statusCode === 200;
      },
      { what: 'prometheus to be ready', timeoutMs: 30_000 },
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    url,
    api,
    query: async (expr) =>
      (
        await api<{
          resultType: string;
          result: { metric: Record<string, string>; value: [number, string] }[];
        }>('query', { query: expr })
      ).result,
    log: () => output,
    stop,
  };
}

/** An alert as Prometheus' /api/v1/alerts lists it. */
export interface ActiveAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: 'pending' | 'firing';
}

export async function alertsOf(prometheus: PrometheusServer, name: string): Promise<ActiveAlert[]> {
  const { alerts } = await prometheus.api<{ alerts: ActiveAlert[] }>('alerts');
  return alerts.filter((a) => a.labels.alertname === name);
}
