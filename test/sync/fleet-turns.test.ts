import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../src/simulator/index.js';
import { type PgBouncer, startPgBouncer } from '../faults/support/pgbouncer.js';
import { testEnv } from '../support/config.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import { CLI, killChildren, runCli, spawnNode, waitFor } from '../support/processes.js';
import { deletePrefix, uniquePrefix } from '../support/redis.js';
import { startTestSimulator } from '../support/simulator.js';

// A fleet of quiet sources, counted statement by statement by the pooler in front of
// Postgres: a caught-up turn costs its claim and its give-back (DESIGN section 6), and a
// lease row deleted mid-watch is made again and its source synced.
const SOURCES = 100;
const EVENTS = 3;
const keyOf = (i: number): string => `acct_test_turns${i}`;
const lastId = `evt_${String(EVENTS).padStart(12, '0')}`;
const schema = uniqueSchema('fleet_turns');
const prefix = uniquePrefix('fleet_turns');
const dir = mkdtempSync(join(tmpdir(), 'feedsync-fleet-turns-'));
const db = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 2 });
let sim: Simulator;
let bouncer: PgBouncer;

beforeAll(async () => {
  sim = await startTestSimulator();
  for (let i = 0; i < SOURCES; i++) sim.account(keyOf(i)).setBacklog(EVENTS);
  const target = new URL(TEST_DATABASE_URL);
  bouncer = await startPgBouncer({
    host: target.hostname,
    port: Number(target.port || 5432),
    database: target.pathname.slice(1),
  });
});
afterAll(async () => {
  await killChildren();
  await bouncer?.stop();
  await sim?.close();
  await db.end();
  await dropSchema(schema);
  await deletePrefix(prefix);
  rmSync(dir, { recursive: true, force: true });
});

/** One number from Postgres, read beside the pooler (not counted by it). */
async function count(sql: string, params: unknown[] = []): Promise<number> {
  const { rows } = await db.query<{ n: string }>(sql, params);
  return Number(rows[0]?.n ?? 0);
}
// One turn adds one to its lease's token.
const turns = () => count(`SELECT coalesce(sum(token), 0) AS n FROM "${schema}".leases`);

describe('a watch over many quiet sources, through PgBouncer', () => {
  it('costs at most three statements a caught-up turn, and makes a deleted lease row again', async () => {
    const env: Record<string, string> = {
      ...testEnv({ schema, prefix, baseUrl: sim.baseUrl }, { DATABASE_URL: bouncer.url }),
      PATH: process.env.PATH ?? '',
    };
    const sources = Array.from({ length: SOURCES }, (_, i) => {
      env[`KEY_${i}`] = keyOf(i);
      return { source: `acct-${i}`, api_key_env: `KEY_${i}` };
    });
    env.FEED_SOURCES_FILE = join(dir, 'sources.json');
    writeFileSync(env.FEED_SOURCES_FILE, JSON.stringify({ sources }));
    expect((await runCli(['migrate'], env)).code).toBe(0);
    const child = spawnNode([CLI, 'sync', '--watch'], {
      ...env,
      SYNC_INTERVAL_MS: '1000',
      SYNC_CONCURRENCY: '4',
    });
    await waitFor(
      async () =>
        (await count(`SELECT count(*) AS n FROM "${schema}".cursors WHERE after_id = $1`, [lastId])) ===
        SOURCES,
      { what: 'every source caught up', timeoutMs: 60_000 },
    );
    // Every source has had a turn that found nothing new since: the fleet is caught up.
    const settled = await turns();
    await waitFor(async () => (await turns()) >= settled + 2 * SOURCES, {
      what: 'two more turns a source',
      timeoutMs: 60_000,
    });

    const before = { statements: await bouncer.queryCount(), turns: await turns() };
    // A window of at least one more turn a source, however fast the machine turns them.
    await waitFor(async () => (await turns()) >= before.turns + SOURCES, {
      what: 'one more turn a source',
      timeoutMs: 60_000,
    });
    const after = { statements: await bouncer.queryCount(), turns: await turns() };
    const turned = after.turns - before.turns;
    const statements = after.statements - before.statements;
    // The window holds a turn a source at least: enough turns to count the statements by.
    expect(turned).toBeGreaterThanOrEqual(SOURCES);
    // Claim and give-back per turn; the replica's timers (lease rows, the outbox's sweep,
    // pruning) and its gauges come on top, shared by all of the turns.
    expect(statements / turned).toBeLessThanOrEqual(3);
    expect(statements / turned).toBeGreaterThanOrEqual(1);

    // A lease row deleted by hand: made again by the replica, and its source synced again.
    await db.query(`DELETE FROM "${schema}".leases WHERE source = 'acct-7'`);
    const event = sim.account(keyOf(7)).emitContactEvent('contact.subscribed', 'back@example.com');
    await waitFor(
      async () =>
        (await count(`SELECT count(*) AS n FROM "${schema}".events WHERE source = 'acct-7' AND id = $1`, [
          event.id,
        ])) === 1,
      { what: 'the event of the source whose lease row was deleted, stored', timeoutMs: 30_000 },
    );
    expect(await count(`SELECT token AS n FROM "${schema}".leases WHERE source = 'acct-7'`)).toBeGreaterThan(
      0,
    );
    child.signal('SIGTERM');
    const exit = await child.waitExit(15_000);
    expect(exit.code).toBe(0);
    expect(exit.stdout + exit.stderr).toMatch(/lease rows of sources of the file were missing/);
  }, 180_000);
});
