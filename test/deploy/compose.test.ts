import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { checkBaseUrl, isLoopbackHost } from '../../src/config/base-url.js';
import { loadConfig } from '../../src/config/config.js';
import { ROOT } from './manifests.js';

interface Service {
  image?: string;
  build?: string;
  command?: string[];
  environment?: Record<string, string>;
  network_mode?: string;
  ports?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
  stop_grace_period?: string;
}

// Compose reads YAML merge keys (`<<: *anchor`); so must we.
const compose = parse(readFileSync(`${ROOT}docker-compose.yml`, 'utf8'), { merge: true }) as {
  services: Record<string, Service>;
};
const { services } = compose;
const service = (name: string): Service => {
  const found = services[name];
  if (!found) throw new Error(`docker-compose.yml has no service ${name}`);
  return found;
};
const FEEDSYNC = ['simulator', 'migrate', 'worker'];

describe('docker-compose.yml', () => {
  it('has postgres, redis, the simulator, a migrate step and the worker', () => {
    expect(Object.keys(services).sort()).toEqual(['migrate', 'postgres', 'redis', 'simulator', 'worker']);
    for (const name of FEEDSYNC) {
      expect(service(name).build, name).toBe('.');
      expect(service(name).image, name).toBe(service('worker').image);
    }
    expect(service('postgres').healthcheck).toBeDefined();
    expect(service('redis').healthcheck).toBeDefined();
  });

  it('runs Redis with noeviction, which BullMQ needs', () => {
    expect(service('redis').command?.join(' ')).toMatch(/--maxmemory-policy noeviction\b/);
  });

  it('runs each feedsync command through the image entrypoint', () => {
    expect(service('simulator').command).toEqual([
      'simulator',
      '--port',
      '4010',
      '--host',
      '0.0.0.0',
      // The host's browser arrives through Docker's bridge, not loopback.
      '--trust-network',
    ]);
    expect(service('migrate').command).toEqual(['migrate']);
    expect(service('worker').command).toEqual(['sync', '--watch']);
  });

  it('starts the worker after the migration, on healthy Postgres and Redis', () => {
    expect(service('worker').depends_on).toMatchObject({
      migrate: { condition: 'service_completed_successfully' },
      postgres: { condition: 'service_healthy' },
      redis: { condition: 'service_healthy' },
    });
    expect(service('migrate').depends_on).toMatchObject({ postgres: { condition: 'service_healthy' } });
  });

  it('reaches the simulator over loopback, the only place plain http is allowed', () => {
    const worker = service('worker');
    expect(worker.network_mode).toBe('service:simulator');
    const baseUrl = worker.environment?.FEED_BASE_URL ?? '';
    expect(checkBaseUrl(baseUrl)).toBeNull();
    expect(isLoopbackHost(new URL(baseUrl).hostname)).toBe(true);
    expect(new URL(baseUrl).port).toBe(service('simulator').command?.[2]);
  });

  it('gives the worker a configuration that loads, pointing at the compose services', () => {
    const env = service('worker').environment ?? {};
    const config = loadConfig(env, () => {
      throw new Error('compose passes no files');
    });
    expect(new URL(config.database.url).hostname).toBe('postgres');
    expect(new URL(config.redis.url).hostname).toBe('redis');
    expect(service('migrate').environment?.DATABASE_URL).toBe(config.database.url);
    // The worker lives in the simulator's network namespace: its ports are published there.
    expect(service('simulator').ports).toContain(`127.0.0.1:${config.metricsPort}:${config.metricsPort}`);
    expect(service('worker').ports).toBeUndefined();
  });

  it('publishes ports on the loopback interface only', () => {
    for (const [name, s] of Object.entries(services)) {
      for (const port of s.ports ?? []) expect(port, name).toMatch(/^127\.0\.0\.1:\d+:\d+$/);
    }
  });

  it('leaves the worker time to drain on stop', () => {
    expect(Number.parseInt(service('worker').stop_grace_period ?? '10', 10)).toBeGreaterThan(30);
  });
});
