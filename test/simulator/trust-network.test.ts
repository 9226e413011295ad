import { request as httpRequest, type IncomingMessage } from 'node:http';
import { networkInterfaces } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { simulatorCommand } from '../../src/cli/commands/simulator.js';
import { checkControlRequest } from '../../src/simulator/control.js';
import type { Simulator } from '../../src/simulator/index.js';
import { startTestSimulator } from '../support/simulator.js';

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

/** This machine's own non-loopback IPv4 address, if it has one. */
const ownAddress = Object.values(networkInterfaces())
  .flat()
  .find((a) => a?.family === 'IPv4' && !a.internal)?.address;

/**
 * A GET to the simulator, which listens on loopback, from a socket bound to this
 * machine's non-loopback address: the simulator sees a client that is not loopback.
 */
function getFrom(sim: Simulator, path: string, localAddress: string, host?: string) {
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port: sim.port,
        path,
        localAddress,
        timeout: 30_000,
        ...(host ? { headers: { host } } : {}),
      },
      (res) => {
        let body = '';
        res.on('data', (chunk) => (body += String(chunk)));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}

describe.skipIf(ownAddress === undefined)('a client from a non-loopback address', () => {
  const address = ownAddress!;
  let closed: Simulator;
  let trusted: Simulator;
  beforeAll(async () => {
    closed = await startTestSimulator();
    trusted = await startTestSimulator({ trustNetwork: true });
  });
  afterAll(async () => {
    await closed?.close();
    await trusted?.close();
  });

  it('gets 403 from the page and /_sim by default', async () => {
    for (const path of ['/', '/_sim/stats']) {
      const res = await getFrom(closed, path, address);
      expect(res.status, path).toBe(403);
      expect(res.body).toContain('--trust-network');
    }
  });

  it('is served with --trust-network, and still refused when the page names another host', async () => {
    expect((await getFrom(trusted, '/', address)).status).toBe(200);
    const stats = await getFrom(trusted, '/_sim/stats', address);
    expect(stats.status).toBe(200);
    expect(JSON.parse(stats.body)).toHaveProperty('emails_sent', 0);
    expect((await getFrom(trusted, '/_sim/stats', address, 'evil.example')).status).toBe(403);
  });
});
