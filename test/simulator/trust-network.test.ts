import { spawnSync } from 'node:child_process';
import type { IncomingMessage } from 'node:http';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { simulatorCommand } from '../../src/cli/commands/simulator.js';
import { checkControlRequest } from '../../src/simulator/control.js';
import { createNetns, type Netns } from '../support/netns.js';

/** The built package: the child runs the simulator as the CLI ships it. */
const DIST = fileURLToPath(new URL('../../dist', import.meta.url));

/** A request as the server sees it: the client's address and the headers. */
function seen(remoteAddress: string, headers: Record<string, string>): IncomingMessage {
  return { socket: { remoteAddress }, headers } as unknown as IncomingMessage;
}

describe('the control check', () => {
  // Docker Compose: the host's browser reaches the published port through the bridge's gateway.
  const bridged = seen('::ffff:172.18.0.1', { host: 'localhost:4010' });

  it('refuses a client from another address, naming the flag that admits it', () => {
    expect(() => checkControlRequest(bridged)).toThrow(/loopback clients only.*--trust-network/);
    expect(() => checkControlRequest(seen('127.0.0.1', { host: 'localhost:4010' }))).not.toThrow();
  });

  it('admits any client address on a trusted network, still only pages that name this machine', () => {
    expect(() => checkControlRequest(bridged, true)).not.toThrow();
    // DNS rebinding and other sites' pages stay refused.
    expect(() => checkControlRequest(seen('172.18.0.1', { host: 'evil.example:4010' }), true)).toThrow(
      /pages of this machine only/,
    );
    expect(() =>
      checkControlRequest(
        seen('172.18.0.1', { host: 'localhost:4010', origin: 'https://evil.example' }),
        true,
      ),
    ).toThrow(/pages of this machine only/);
  });

  it('is a flag of the command, off by default', async () => {
    const parse = async (args: string[]) => {
      const cmd = simulatorCommand().action(() => {});
      await cmd.parseAsync(args, { from: 'user' });
      return cmd.opts().trustNetwork;
    };
    expect(await parse([])).toBe(false);
    expect(await parse(['--trust-network'])).toBe(true);
  });
});

/** The client's address: not loopback, arranged on the loopback device of a namespace of the test's own. */
const CLIENT = '10.77.0.1';

/**
 * Runs in the namespace: two simulators on 127.0.0.1 (one with trustNetwork), and GETs to
 * them from a socket bound to CLIENT, so that the simulator sees a client that is not
 * loopback. Prints each answer as JSON.
 */
const CHILD = `
  import { request } from 'node:http';
  import { startSimulator } from ${JSON.stringify(pathToFileURL(`${DIST}/simulator/index.js`).href)};
  const get = (sim, path, host) => new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: sim.port, path, localAddress: ${JSON.stringify(CLIENT)},
      timeout: 10000, ...(host ? { headers: { host } } : {}) }, (res) => {
      let body = '';
      res.on('data', (c) => (body += String(c)));
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
  const closed = await startSimulator({ port: 0 });
  const trusted = await startSimulator({ port: 0, trustNetwork: true });
  try {
    process.stdout.write(JSON.stringify({
      closedPage: await get(closed, '/'),
      closedStats: await get(closed, '/_sim/stats'),
      trustedPage: await get(trusted, '/'),
      trustedStats: await get(trusted, '/_sim/stats'),
      trustedOtherHost: await get(trusted, '/_sim/stats', 'evil.example'),
    }));
  } finally {
    await closed.close();
    await trusted.close();
  }`;

type Answer = { status: number; body: string };

describe('a client from a non-loopback address', () => {
  let ns: Netns;
  let answers: Record<
    'closedPage' | 'closedStats' | 'trustedPage' | 'trustedStats' | 'trustedOtherHost',
    Answer
  >;
  beforeAll(async () => {
    ns = createNetns('trust');
    const [ip, add] = ns.argv('ip', ['addr', 'add', `${CLIENT}/32`, 'dev', 'lo']);
    const added = spawnSync(ip, add, { encoding: 'utf8', timeout: 10_000 });
    expect(added.status, added.stderr).toBe(0);
    const [cmd, args] = ns.argv(process.execPath, ['--input-type=module', '-e', CHILD]);
    const run = spawnSync(cmd, args, { encoding: 'utf8', timeout: 30_000 });
    expect(run.status, run.stderr).toBe(0);
    answers = JSON.parse(run.stdout);
  });
  afterAll(async () => {
    await ns?.dispose();
  });

  it('gets 403 from the page and /_sim by default', () => {
    for (const res of [answers.closedPage, answers.closedStats]) {
      expect(res.status).toBe(403);
      expect(res.body).toContain('--trust-network');
    }
  });

  it('is served with --trust-network, and still refused when the page names another host', () => {
    expect(answers.trustedPage.status).toBe(200);
    expect(answers.trustedStats.status).toBe(200);
    expect(JSON.parse(answers.trustedStats.body)).toHaveProperty('emails_sent', 0);
    expect(answers.trustedOtherHost.status).toBe(403);
  });
});
