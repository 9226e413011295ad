import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { testEnv } from '../support/config.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../support/postgres.js';
import { CLI, killChildren, runCli, spawnNode, waitFor } from '../support/processes.js';
import { deletePrefix, uniquePrefix } from '../support/redis.js';
import { useSimulator } from '../support/simulator.js';

const schema = uniqueSchema('stalled_turn');
const prefix = uniquePrefix('stalled_turn');
// Every page's body drips over 30 s in 20 pieces, 1.5 s apart: each piece comes within
// FEED_TIMEOUT_MS, so no timeout ends the request, and no page ever completes in time.
const sim = useSimulator({ backlog: 50, faults: { slowBodyMs: 30_000 } });
const LEASE_MS = 1_500;
const FEED_TIMEOUT_MS = 2_000;
const CONCURRENCY = 2;
const STALL_LINE = `its turn made no progress for ${LEASE_MS + CONCURRENCY * FEED_TIMEOUT_MS} ms, so it was not renewed`;

afterAll(async () => {
  await killChildren();
  await dropSchema(schema);
  await deletePrefix(prefix);
});

/** The lease row's fencing token: it grows with every turn that takes the source. */
async function tokenOf(source: string): Promise<number> {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  try {
    const { rows } = await client.query<{ token: string }>(
      `SELECT token::text AS token FROM "${schema}".leases WHERE source = $1`,
      [source],
    );
    return Number(rows[0]?.token ?? 0);
  } finally {
    await client.end();
  }
}

describe('sync --watch on a turn that makes no progress', () => {
  it('stops renewing its lease after SOURCE_LEASE_MS plus SYNC_CONCURRENCY x FEED_TIMEOUT_MS, ends the turn, and takes the source afresh later', async () => {
    const env = { PATH: process.env.PATH ?? '', ...testEnv({ schema, prefix, baseUrl: sim().baseUrl }) };
    expect((await runCli(['migrate'], env)).code).toBe(0);
    const child = spawnNode([CLI, 'sync', '--watch'], {
      ...env,
      METRICS_PORT: '0',
      SYNC_INTERVAL_MS: '200',
      SOURCE_LEASE_MS: String(LEASE_MS),
      FEED_TIMEOUT_MS: String(FEED_TIMEOUT_MS),
      FEED_MAX_RETRIES: '0',
      SYNC_CONCURRENCY: String(CONCURRENCY),
    });
    const started = performance.now();
    await waitFor(() => child.stdout().includes(STALL_LINE), {
      what: 'the watch to give up the lease of its stalled turn',
      timeoutMs: 20_000,
    });
    // Before the page's body could have ended (30 s): the stall, not a timeout, ended it.
    expect(performance.now() - started).toBeLessThan(15_000);
    const first = await tokenOf('default');
    // The stalled turn ended: the source is taken again by a later turn, under a new token.
    await waitFor(async () => ((await tokenOf('default')) > first ? true : null), {
      what: 'a later turn to take the source',
      timeoutMs: 20_000,
    });
    expect(child.stdout()).toContain('this worker lost the lease of the source');
    child.signal('SIGTERM');
    expect((await child.waitExit(15_000)).code).toBe(0);
  }, 60_000);
});
