import { describe, expect, it } from 'vitest';
import { testEnv } from '../support/config.js';
import { runCli } from '../support/processes.js';
import { useSimulator } from '../support/simulator.js';

const sim = useSimulator();
const PATH = process.env.PATH ?? '';

describe('input is refused with a word, never taken silently', () => {
  it('webhooks create refuses an event type this release does not know, naming the closest (exit 2)', async () => {
    const env = { PATH, ...testEnv({ schema: 'unused', prefix: 'unused', baseUrl: sim().baseUrl }) };
    const res = await runCli(
      ['webhooks', 'create', '--url', 'http://127.0.0.1:9/hook', '--events', 'email.delivered,email.bounce'],
      env,
    );
    expect(res.code).toBe(2);
    expect(res.stderr).toContain(
      '"email.bounce" is not an event type of this release; did you mean email.bounced?',
    );
    const list = await runCli(['webhooks', 'list'], env);
    expect(list.stdout).toBe('no webhooks registered\n');
    // A type the service added since is written +name, as in FEED_TYPES.
    const marked = await runCli(
      ['webhooks', 'create', '--url', 'http://127.0.0.1:9/hook', '--events', '+email.opened', '--json'],
      env,
    );
    expect(marked.code, marked.stderr).toBe(0);
    expect((JSON.parse(marked.stdout) as { events: string[] }).events).toEqual(['email.opened']);
  });

  it('doctor --timeout-ms takes a whole number of milliseconds only (exit 2)', async () => {
    for (const value of ['abc', '0', '1.5']) {
      const res = await runCli(['doctor', '--timeout-ms', value], { PATH });
      expect(res.code).toBe(2);
      expect(res.stderr).toContain(`argument '${value}' is invalid. must be a whole number of milliseconds`);
      expect(res.stdout).toBe('');
    }
  });

  it('requeue --failed refuses --source: failed jobs are retried per queue (exit 2)', async () => {
    const res = await runCli(['requeue', '--failed', '--source', 'x'], {
      PATH,
      ...testEnv({ schema: 'unused', prefix: 'unused' }),
    });
    expect(res.code).toBe(2);
    expect(res.stderr).toBe(
      'feedsync: --source: not with --failed (it retries every failed job of the queue)\n',
    );
  });
});
