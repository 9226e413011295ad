import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { dropSchema, TEST_DATABASE_URL } from '../support/postgres.js';
import { deletePrefix } from '../support/redis.js';

const run = promisify(execFile);

afterAll(async () => {
  await dropSchema('feedsync_demo');
  await deletePrefix('feedsync-demo');
});

describe('feedsync demo', () => {
  it('sends through its own simulator, syncs, and shows that nothing was sent again', async () => {
    const { stdout } = await run('node', ['dist/cli.js', 'demo'], {
      env: { PATH: process.env.PATH, DATABASE_URL: TEST_DATABASE_URL },
      timeout: 60_000,
    });
    expect(stdout).toContain('13 events stored');
    expect(stdout).toContain('a second run stores 0 new events');
    expect(stdout).toMatch(/feedsync-demo:email-events\s+\{"waiting":11/);
    expect(stdout).toMatch(/feedsync-demo:contact-events\s+\{"waiting":2/);
    expect(stdout).toContain('5 before the sync, 5 after: no mail was sent again');
  });
});
