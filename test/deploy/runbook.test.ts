import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from './manifests.js';

const DOCS = ['docs/RUNBOOK.md', 'docs/DEPLOYMENT.md'];

/** Every `kubectl … exec … -- <command>` of the docs, as the command run inside the pod. */
function execCommands(): { doc: string; command: string }[] {
  return DOCS.flatMap((doc) =>
    [...readFileSync(`${ROOT}${doc}`, 'utf8').matchAll(/kubectl [^`\n]*?\bexec\b[^`\n]*? -- ([^`\n]+)/g)].map(
      (m) => ({ doc, command: m[1]! }),
    ),
  );
}

/** The `node -e '<script>' <url>` probes of the runbook, split as a shell would. */
function nodeProbes(): { script: string; url: string }[] {
  return execCommands().flatMap(({ command }) => {
    const m = /^node -e '([^']+)' (\S+)$/.exec(command.trim());
    return m ? [{ script: m[1]!, url: m[2]! }] : [];
  });
}

function runProbe(script: string, url: string): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['-e', script, url], { timeout: 30_000 });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += String(d)));
    child.stderr.on('data', (d) => (err += String(d)));
    child.on('close', (code) => resolve({ code, out, err }));
  });
}

describe("the runbook's commands inside a pod", () => {
  let server: Server;
  let base = '';
  beforeAll(async () => {
    server = createServer((req, res) => {
      const ready = req.url === '/readyz';
      res.writeHead(ready ? 200 : 503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ postgres: ready, redis: true }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('use only what the node:*-slim image has: no wget, no curl', () => {
    const commands = execCommands();
    expect(commands.length).toBeGreaterThan(0);
    for (const { doc, command } of commands) expect(command, doc).not.toMatch(/\b(wget|curl)\b/);
    const from = /^FROM node:(\d+)[^\s]*-slim AS runtime$/m.exec(readFileSync(`${ROOT}Dockerfile`, 'utf8'));
    // fetch is global from Node 18 on.
    expect(Number(from?.[1])).toBeGreaterThanOrEqual(18);
  });

  it('probe an endpoint with node: the status and body, exit 0 on 2xx and 1 otherwise', async () => {
    const probes = nodeProbes();
    expect(probes.length).toBeGreaterThan(0);
    for (const { script, url } of probes) {
      const path = new URL(url).pathname;
      const ok = await runProbe(script, `${base}${path}`);
      expect(ok).toMatchObject({ code: 0, out: '200 {"postgres":true,"redis":true}\n' });
      const failing = await runProbe(script, `${base}/not-ready`);
      expect(failing).toMatchObject({ code: 1, out: '503 {"postgres":false,"redis":true}\n' });
      // A closed port: one line naming the refusal, no stack trace.
      server.close();
      const refused = await runProbe(script, `${base}${path}`);
      expect(refused.code).toBe(1);
      expect(refused.err.trim().split('\n')).toEqual([expect.stringMatching(/ECONNREFUSED/)]);
      await new Promise<void>((resolve) => server.listen(Number(new URL(base).port), '127.0.0.1', resolve));
    }
  });
});
