import { afterAll, describe, expect, it } from 'vitest';
import { testEnv } from '../support/config.js';
import { CLI, killChildren, runCli, spawnNode, waitFor } from '../support/processes.js';
import { useSandboxes } from '../sync/harness.js';

const sandbox = useSandboxes();
const PATH = process.env.PATH ?? '';
afterAll(killChildren);

describe('what commands print, and where', () => {
  it('migrate: its human line on stdout, its log line on stderr, one of each', async () => {
    const box = await sandbox('cli_migrate_out');
    const res = await runCli(['migrate'], {
      PATH,
      ...testEnv({ schema: box.schema, prefix: box.prefix }),
      LOG_LEVEL: 'info',
    });
    expect(res.code).toBe(0);
    expect(res.stdout).toBe(`schema ${box.schema} already up to date\n`);
    const logs = res.stderr.trim().split('\n');
    expect(logs).toHaveLength(1);
    expect(JSON.parse(logs[0]!)).toMatchObject({ msg: 'schema up to date', schema: box.schema });
  });

  it('serve-webhooks on SIGTERM says it finishes the requests in flight, not a page', async () => {
    const box = await sandbox('cli_receiver_stop');
    const child = spawnNode([CLI, 'serve-webhooks'], {
      PATH,
      ...testEnv({ schema: box.schema, prefix: box.prefix }),
      WEBHOOK_SECRET: 'whsec_cli_output_test',
      WEBHOOK_PORT: '0',
      LOG_LEVEL: 'info',
    });
    await waitFor(() => child.stdout().includes('serving /metrics'), {
      timeoutMs: 20_000,
      what: 'the receiver',
    });
    child.signal('SIGTERM');
    const res = await child.waitExit(20_000);
    expect(res.code).toBe(0);
    expect(res.stdout).toContain('stopping: no new webhooks taken, finishing the requests in flight');
    expect(res.stdout).not.toContain('page in hand');
  });

  it('requeue --since with a unit it does not take names the units it takes (exit 2)', async () => {
    const box = await sandbox('cli_requeue_units');
    const res = await runCli(['requeue', '--since', '1w'], {
      PATH,
      ...testEnv({ schema: box.schema, prefix: box.prefix }),
    });
    expect(res.code).toBe(2);
    expect(res.stderr).toBe(
      'feedsync: requeue --since: "1w" is not a duration requeue takes: the units are s, m, h and d ' +
        '(90m, 6h, 7d); or give a time (2024-05-01T12:00Z) or a stored event id\n',
    );
    const help = await runCli(['requeue', '--help'], { PATH });
    expect(help.stdout).toMatch(/s, m, h\s+or d/);
  });
});
