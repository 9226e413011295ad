import { describe, expect, it } from 'vitest';
import { TEST_DATABASE_URL } from '../support/postgres.js';
import { runCli } from '../support/processes.js';

const env = { PATH: process.env.PATH ?? '' };
const COMMANDS = [
  ['migrate'],
  ['sync'],
  ['status'],
  ['cursor'],
  ['cursor', 'show'],
  ['cursor', 'set'],
  ['cursor', 'reset'],
  ['reconcile'],
  ['simulator'],
  ['demo'],
  ['serve-webhooks'],
  ['webhooks'],
  ['webhooks', 'list'],
  ['webhooks', 'create'],
  ['webhooks', 'delete'],
  ['webhooks', 'test'],
  ['send'],
  ['suppressions'],
  ['suppressions', 'list'],
  ['suppressions', 'remove'],
  ['requeue'],
  ['doctor'],
];

describe('the command line', () => {
  it('lists every command in its help', async () => {
    const { code, stdout } = await runCli(['--help'], env);
    expect(code).toBe(0);
    for (const [name] of COMMANDS) expect(stdout).toContain(name);
  });

  it.each(COMMANDS)('%s has --help, with its exit codes', async (...words) => {
    const { code, stdout } = await runCli([...words, '--help'], env);
    expect(code).toBe(0);
    expect(stdout).toContain(`Usage: feedsync ${words.join(' ')}`);
    expect(stdout).toContain('Exit codes:');
  });

  it('help, and help <command>, print the help and exit 0', async () => {
    const [top, sync, nested] = await Promise.all([
      runCli(['help'], env),
      runCli(['help', 'sync'], env),
      runCli(['cursor', 'help', 'set'], env),
    ]);
    expect([top.code, sync.code, nested.code]).toEqual([0, 0, 0]);
    expect(top.stdout).toContain('Usage: feedsync [options] [command]');
    expect(top.stdout).toContain('Exit codes:');
    expect(sync.stdout).toContain('Usage: feedsync sync');
    expect(nested.stdout).toContain('Usage: feedsync cursor set');
  });

  it.each([
    [['help', 'nosuch'], 'Usage: feedsync [options]'],
    [['help', 'cursor', 'nosuch'], 'Usage: feedsync cursor'],
  ])('%j says "unknown command" before the usage, exit 2', async (args, usage) => {
    const { code, stderr } = await runCli(args, env);
    expect(code).toBe(2);
    expect(stderr).toMatch(/^error: unknown command 'nosuch'\n/);
    expect(stderr).toContain(usage);
  });

  it("simulator --help points at the simulator's own page, not at the contract", async () => {
    const { stdout } = await runCli(['simulator', '--help'], env);
    expect(stdout).toContain('docs/SIMULATOR.md');
    expect(stdout).not.toContain('DESIGN');
  });

  it.each([
    [['bogus']],
    [['sync', '--bogus']],
    [['sync', '--once', '--watch']],
    [['cursor']],
    [['cursor', 'set']],
    [['status', 'extra']],
  ])('%j is a usage error: usage printed, exit 2', async (args) => {
    const { code, stderr } = await runCli(args, env);
    expect(code).toBe(2);
    expect(stderr).toMatch(/error|Usage/);
  });

  it('a bad configuration value exits 2 naming the variable', async () => {
    const { code, stderr } = await runCli(['status'], { ...env, FEED_PAGE_LIMIT: 'lots' });
    expect(code).toBe(2);
    expect(stderr).toContain('FEED_PAGE_LIMIT');
  });

  it('a command on an unmigrated schema exits 2 and says to migrate', async () => {
    const { code, stderr } = await runCli(['reconcile'], {
      ...env,
      DATABASE_URL: TEST_DATABASE_URL,
      DATABASE_SCHEMA: 'no_such_schema_here',
    });
    expect(code).toBe(2);
    expect(stderr).toContain('feedsync migrate');
  });
});
