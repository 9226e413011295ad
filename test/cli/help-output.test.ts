import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import type { SimContext } from '../../src/simulator/context.js';
import { controlRoutes } from '../../src/simulator/control.js';
import { dashboardRoutes } from '../../src/simulator/dashboard-routes.js';
import { CLI, runCli } from '../support/processes.js';

const env = { PATH: process.env.PATH ?? '' };

/** Runs the CLI with both output pipes closed by the reader at once, as `… 2>&1 | head -0` would. */
function runWithReaderGone(args: readonly string[]): Promise<number | null> {
  const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.destroy();
  child.stderr.destroy();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`feedsync ${args.join(' ')} did not exit`));
    }, 20_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
  });
}

describe('help and output', () => {
  it('help <command> <subcommand> prints the subcommand help', async () => {
    const res = await runCli(['help', 'cursor', 'set'], env);
    expect(res.code).toBe(0);
    expect(res.stdout).toContain('Usage: feedsync cursor set [options] <event-id>');
  });

  it('output to a reader that went away keeps the exit code: 2 for a usage error, 0 for help', async () => {
    expect(await runWithReaderGone(['sync', '--bogus'])).toBe(2);
    expect(await runWithReaderGone(['--help'])).toBe(0);
  });
});

describe('the top-level help lists every exit code', () => {
  it('0 to 5, each of the table in docs/DESIGN.md', async () => {
    const { stdout } = await runCli(['--help'], env);
    const listed = stdout.replace(/\s+/g, ' ');
    for (const code of [
      '0 success',
      '1 runtime failure',
      '2 usage',
      '3 the service rejected',
      '4 (sync --once) not caught up',
      "5 (sync) another account's feed",
    ]) {
      expect(listed).toContain(code);
    }
  });
});

describe('each subcommand lists its own exit codes', () => {
  it.each([
    ['list', 'listed'],
    ['create', 'registered'],
    ['delete', 'deleted'],
  ])('webhooks %s', async (name, done) => {
    const { stdout } = await runCli(['webhooks', name, '--help'], env);
    expect(stdout).toContain(`Exit codes: 0 ${done}, 1 `);
    if (name !== 'delete') expect(stdout).not.toContain('no registration has that id');
  });
});

describe('the simulator', () => {
  it('--help lists every /_sim route the simulator serves', async () => {
    const { stdout } = await runCli(['simulator', '--help'], env);
    // The routes as the server builds them: a route added later must be added to the help too.
    const ctx = {} as SimContext;
    const routes = [...controlRoutes(ctx), ...dashboardRoutes(ctx)].filter((r) => r.path.startsWith('/_sim'));
    expect(routes.length).toBeGreaterThan(5);
    // `…/{account}/webhooks|emails|events` names three paths.
    const named = stdout.split('\n').flatMap((line) =>
      (line.match(/\/_sim\S*/g) ?? []).flatMap((token) => {
        const path = token.replace(/,$/, '');
        const cut = path.lastIndexOf('/');
        return path
          .slice(cut + 1)
          .split('|')
          .map((last) => ({ path: `${path.slice(0, cut)}/${last}`, line }));
      }),
    );
    for (const r of routes) {
      const path = r.path.replace(/:(\w+)/g, '{$1}');
      const found = named.find((n) => n.path === path);
      expect(found, `${r.method} ${r.path}`).toBeDefined();
      expect(found?.line).toContain(r.method);
    }
  });
});
