import { afterAll, describe, expect, it } from 'vitest';
import type { StatusReport } from '../../src/cli/status-report.js';
import { queryBuilder } from '../../src/store/db.js';
import { testEnv } from '../support/config.js';
import { dropSchema, uniqueSchema } from '../support/postgres.js';
import { killChildren, runCli } from '../support/processes.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import {
  cursorOf,
  EMAIL_QUEUE,
  expectExactlyOnce,
  queuedJobIds,
  storedCount,
  useSandboxes,
} from './harness.js';

const BACKLOG = 300;
const sim = useSimulator({ backlog: BACKLOG });
const sandbox = useSandboxes();
const unmigrated = uniqueSchema('cli_unmigrated');
afterAll(async () => {
  await killChildren();
  await dropSchema(unmigrated);
});

const id = (position: number): string => `evt_${String(position).padStart(12, '0')}`;
const outputs: string[] = [];

/** `node dist/bin/feedsync.js <args>`, keeping the output for the final check on secrets. */
async function cli(args: string[], env: Record<string, string>) {
  const res = await runCli(args, env);
  outputs.push(res.stdout, res.stderr);
  return res;
}

describe('the CLI around a sync', () => {
  it('status --json, cursor set|reset, reconcile, and the FEED_TYPES guard', async () => {
    const box = await sandbox('cli');
    const env = testEnv({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl });

    expect((await cli(['sync', '--once'], env)).code).toBe(0);
    const status = await cli(['status', '--json'], env);
    expect(status.code, status.stderr).toBe(0);
    const report = JSON.parse(status.stdout) as StatusReport;
    expect(report.schema).toBe(box.schema);
    expect(report.sources).toEqual([
      expect.objectContaining({
        source: 'default',
        cursor: id(BACKLOG),
        types: null,
        eventsStored: BACKLOG,
        outboxBacklog: 0,
        quarantined: 0,
        lastSuccessAt: expect.any(String),
      }),
    ]);
    expect(report.queues[EMAIL_QUEUE]).toMatchObject({ waiting: BACKLOG });

    // Replay from an older point: the events are read again, stored and enqueued once.
    const set = await cli(['cursor', 'set', id(100)], env);
    expect(set.code, set.stderr).toBe(0);
    expect(await cursorOf(box.store)).toBe(id(100));
    expect((await cli(['sync', '--once'], env)).code).toBe(0);
    expect(await cursorOf(box.store)).toBe(id(BACKLOG));
    await expectExactlyOnce({ store: box.store, prefix: box.prefix, expected: BACKLOG });

    // Lose two events; reconcile brings back exactly those, and leaves the cursor.
    await box.store.pool.query(`DELETE FROM "${box.schema}".events WHERE id = ANY($1)`, [[id(7), id(250)]]);
    const reconcile = await cli(['reconcile', '--from', id(5)], env);
    expect(reconcile.code, reconcile.stderr).toBe(0);
    expect(reconcile.stdout).toContain('reconcile done: 2 missing events stored and enqueued');
    expect(await cursorOf(box.store)).toBe(id(BACKLOG));
    expect(await storedCount(box.store)).toBe(BACKLOG);

    // Reset with a narrower filter; a run with another filter then refuses, saying how to reset.
    const bounced = { ...env, FEED_TYPES: 'email.bounced' };
    const reset = await cli(['cursor', 'reset'], bounced);
    expect(reset.code, reset.stderr).toBe(0);
    const row = await (await queryBuilder(box.store))
      .selectFrom('cursors')
      .selectAll()
      .executeTakeFirstOrThrow();
    expect(row).toMatchObject({ after_id: null, types: ['email.bounced'] });
    const mismatch = await cli(['sync', '--once'], env);
    expect(mismatch.code).toBe(2);
    expect(mismatch.stderr).toContain('feedsync cursor reset --source default');
    expect(await cursorOf(box.store)).toBeNull();
    expect((await cli(['sync', '--once'], bounced)).code).toBe(0);
    expect(await cursorOf(box.store)).not.toBeNull();
    expect(await queuedJobIds(box.prefix, EMAIL_QUEUE)).toHaveLength(BACKLOG);
  });

  it('exit 2 on an unmigrated schema, exit 3 on a rejected key', async () => {
    const box = await sandbox('cli_exit');
    const [outdated, rejected] = await Promise.all([
      cli(['sync', '--once'], testEnv({ schema: unmigrated, prefix: box.prefix, baseUrl: sim().baseUrl })),
      cli(
        ['sync', '--once'],
        testEnv(
          { schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl },
          { FEED_API_KEY: 'not-a-valid-key' },
        ),
      ),
    ]);
    expect(outdated.code).toBe(2);
    expect(outdated.stderr).toContain('feedsync migrate');
    expect(rejected.code).toBe(3);
    expect(rejected.stderr).toContain('rejected the API key');
    expect(`${rejected.stdout}${rejected.stderr}`).not.toContain('not-a-valid-key');
    expect(sim().stats().requests['GET /api/events']?.['401']).toBe(1);
  });

  it('never printed the API key, never sent mail', () => {
    expect(outputs.join('\n')).not.toContain(TEST_API_KEY);
    expect(sim().stats().emails_sent).toBe(0);
  });
});
