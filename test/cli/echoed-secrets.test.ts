import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { scrubText } from '../../src/scrub.js';
import { testEnv } from '../support/config.js';
import { killChildren, runCli } from '../support/processes.js';
import { TEST_API_KEY } from '../support/simulator.js';
import { useSandboxes } from '../sync/harness.js';

const sandbox = useSandboxes();
const ADDRESS = 'person@example.com';
let service: Server;
let baseUrl: string;

/** A service whose every answer is a 422 that echoes the caller's key and a recipient's address. */
beforeAll(async () => {
  service = createServer((req, res) => {
    const key = (req.headers.authorization ?? '').replace(/^Bearer /, '');
    res.writeHead(422, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        error: { code: 'validation_error', message: `key ${key} may not read mail of <${ADDRESS}>` },
      }),
    );
  });
  await new Promise<void>((resolve) => service.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(service.address() as AddressInfo).port}/api`;
});
afterAll(async () => {
  await killChildren();
  await new Promise<void>((resolve) => service.close(() => resolve()));
});

it("keeps a key and an address that the service's error echoes out of stderr, leases.last_error and status", async () => {
  const box = await sandbox('echoed_secrets');
  const env = {
    PATH: process.env.PATH ?? '',
    ...testEnv({ schema: box.schema, prefix: box.prefix, baseUrl }),
  };
  const run = await runCli(['sync', '--once'], env);
  expect(run.code, run.stderr).toBe(1);
  expect(run.stderr).toContain('HTTP 422: key [REDACTED] may not read mail of <[address]>');

  const { rows } = await box.store.pool.query<{ last_error: string }>(
    `SELECT last_error FROM "${box.schema}".leases`,
  );
  expect(rows).toHaveLength(1);
  expect(rows[0]!.last_error).toContain('key [REDACTED] may not read mail of <[address]>');

  const status = await runCli(['status'], env);
  const json = await runCli(['status', '--json'], env);
  expect(status.stdout).toContain('[address]');
  expect(JSON.parse(json.stdout).sources[0].lastError).toContain('[REDACTED]');
  for (const text of [run.stderr, run.stdout, rows[0]!.last_error, status.stdout, json.stdout, json.stderr]) {
    expect(text).not.toContain(TEST_API_KEY);
    expect(text).not.toContain(ADDRESS);
  }
});

it('masks addresses but not the user of a URL, and secrets wherever they stand', () => {
  expect(scrubText('to bob@example.com, "eve@example.org"', [])).toBe('to [address], "[address]"');
  expect(scrubText('postgres://postgres@127.0.0.1:5432/db', [])).toBe(
    'postgres://postgres@127.0.0.1:5432/db',
  );
  expect(scrubText('redis://:pw@host:6379', [])).toBe('redis://:[REDACTED]@host:6379');
  expect(scrubText('key=sk_live_1234 sent', ['sk_live_1234'])).toBe('key=[REDACTED] sent');
});
