import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CommanderError } from 'commander';
import { beforeAll, describe, expect, it } from 'vitest';
import { simulatorCommand } from '../../src/cli/commands/simulator.js';
import { call } from './http.js';

const CLI = fileURLToPath(new URL('../../dist/bin/feedsync.js', import.meta.url));

async function parse(args: string[]): Promise<unknown> {
  const cmd = simulatorCommand().action(() => {});
  cmd.configureOutput({ writeErr: () => {}, writeOut: () => {} });
  try {
    await cmd.parseAsync(args, { from: 'user' });
    return cmd.opts();
  } catch (err) {
    return err;
  }
}

describe('feedsync simulator flags', () => {
  it('parses every knob', async () => {
    const opts = await parse([
      '--port=0',
      '--time-scale=0.01',
      '--backlog=1000',
      '--key-prefix=acme',
      '--latency-ms=5',
      '--rate-429=0.1',
      '--retry-after-sec=2',
      '--rate-5xx=0.2',
      '--duplicate-rate=0.3',
      '--slow-body-ms=10',
      '--truncate-rate=0.4',
      '--hang-rate=0.05',
      '--webhook-scheme=standard',
      '--webhook-body-without-id',
    ]);
    expect(opts).toMatchObject({
      port: 0,
      timeScale: 0.01,
      backlog: 1000,
      keyPrefix: 'acme',
      latencyMs: 5,
      rate429: 0.1,
      retryAfterSec: 2,
      rate5xx: 0.2,
      duplicateRate: 0.3,
      slowBodyMs: 10,
      truncateRate: 0.4,
      hangRate: 0.05,
      webhookScheme: 'standard',
      webhookBodyWithoutId: true,
    });
    expect(await parse([])).toMatchObject({ webhookScheme: 'service', webhookBodyWithoutId: false });
  });

  it.each([
    ['--rate-429=2'],
    ['--port=70000'],
    ['--backlog=1.5'],
    ['--latency-ms=abc'],
    ['--bogus'],
    ['--webhook-scheme=svix'],
  ])('refuses %s as a usage error', async (flag) => {
    expect(await parse([flag])).toBeInstanceOf(CommanderError);
  });
});

describe('the built command', () => {
  beforeAll(() => {
    expect(existsSync(CLI), `${CLI} is missing: run npm run build first`).toBe(true);
  });

  it('prints its base URL, serves the API and the dashboard, and exits 0 on SIGTERM', async () => {
    const child = spawn(process.execPath, [CLI, 'simulator', '--port', '0', '--log-level', 'silent'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      let out = '';
      const baseUrl = await new Promise<string>((resolve, reject) => {
        child.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          const m = /listening at (http:\/\/\S+\/api)[\s\S]*Control API/.exec(out);
          if (m) resolve(m[1]!);
        });
        child.on('exit', () => reject(new Error(`exited early: ${out}`)));
      });
      expect(out).toMatch(/Example key: sim_test_\w+/);
      expect(out).toMatch(/Dashboard: +http:\/\/127\.0\.0\.1:\d+\/ /);
      const origin = baseUrl.replace(/\/api$/, '');
      const sim = { origin } as Parameters<typeof call>[0];
      expect((await call(sim, 'GET', '/api/events', { key: 'sim_test_local' })).status).toBe(200);
      expect((await call(sim, 'GET', '/_sim/stats', { key: null })).body.emails_sent).toBe(0);
      // The dashboard's files sit beside the bundle's chunks (scripts/bundle.mjs copies them).
      const page = await fetch(`${origin}/`);
      expect(page.status).toBe(200);
      expect(await page.text()).toMatch(/<html/i);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  });
});
