import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Simulator } from '../../src/simulator/index.js';
import { TEST_DATABASE_URL } from '../support/postgres.js';
import { CLI, killChildren, type RunningChild, runCli, spawnNode, waitFor } from '../support/processes.js';
import { between, seeded } from '../support/random.js';
import { startTestSimulator } from '../support/simulator.js';
import { fateOf } from './support/fate.js';
import { type PgBouncer, startPgBouncer } from './support/pgbouncer.js';
import { measured } from './support/results.js';
import { useSandboxes } from './support/sandbox.js';
import { readWholeFeed } from './support/served.js';

const SEED = 0xb0b5;
const SOURCES = 6;
const EVENTS = 300;
const ONCE_RUNS = 3;
const REPLICAS = 3;
const KILLS = 6;
const LEASE_MS = 2_000;
const keyOf = (i: number): string => `acct_test_pool${i}`;
const sandbox = useSandboxes();
const dir = mkdtempSync(join(tmpdir(), 'feedsync-pooled-'));
let sim: Simulator;
let bouncer: PgBouncer;

beforeAll(async () => {
  sim = await startTestSimulator({ faults: { latencyMs: 5 } });
  for (let i = 0; i < SOURCES; i++) sim.account(keyOf(i)).setBacklog(EVENTS);
  const target = new URL(TEST_DATABASE_URL);
  bouncer = await startPgBouncer({
    host: target.hostname,
    port: Number(target.port || 5432),
    database: target.pathname.slice(1) || 'postgres',
  });
});
afterAll(async () => {
  await killChildren();
  await bouncer?.stop();
  await sim.close();
  rmSync(dir, { recursive: true, force: true });
});

it('19. through PgBouncer in transaction mode: migrate, repeated once runs, watch replicas killed; exactly once, no lock left behind', async () => {
  await measured(
    {
      item: 19,
      title: 'through PgBouncer in transaction mode',
      claim:
        'Every command works through a transaction pooler: migrate, once run after once run, and watch replicas ' +
        'killed with SIGKILL store and enqueue each event exactly once, and no advisory lock is ever left on the ' +
        "pooler's server connections.",
      method:
        "Debian's PgBouncer 1.18 (which does not track named prepared statements) started by the test on a free port, " +
        '`pool_mode = transaction`, 4 server connections for every client. Through it, on a fresh schema: ' +
        `\`feedsync migrate\` twice, then \`feedsync doctor\`; ${ONCE_RUNS} \`sync --once\` runs over a sources file of ${SOURCES} accounts of ` +
        `${EVENTS} events, with new mail before each; then ${REPLICAS} \`sync --watch\` replicas (SOURCE_LEASE_MS=${LEASE_MS}), ` +
        `${KILLS} of them killed with SIGKILL at seeded moments (seed 0x${SEED.toString(16)}) and restarted, more mail ` +
        "meanwhile. After each step, pg_locks is read for advisory locks held by the pooler's server connections " +
        '(SHOW SERVERS on its console gives their pids). Last, each account is compared with its feed.',
    },
    async (rec) => {
      rec.injectedWhat = 'SIGKILLs';
      const box = await sandbox('pgbouncer', { migrate: false });
      const env: Record<string, string> = {};
      const sources = Array.from({ length: SOURCES }, (_, i) => {
        env[`KEY_${i}`] = keyOf(i);
        return { source: `acct-${i}`, api_key_env: `KEY_${i}` };
      });
      const file = join(dir, 'sources.json');
      writeFileSync(file, JSON.stringify({ sources }));
      const pooled = box.env(sim.baseUrl, {
        ...env,
        DATABASE_URL: bouncer.url,
        FEED_SOURCES_FILE: file,
        FEED_PAGE_LIMIT: '20',
        SYNC_CONCURRENCY: '3',
        SYNC_INTERVAL_MS: '200',
        SOURCE_LEASE_MS: String(LEASE_MS),
        METRICS_PORT: '0',
        LOG_LEVEL: 'info',
      });
      const locksLeft: number[] = [];
      const advisoryLocks = async (): Promise<number> => {
        const pids = await bouncer.serverPids();
        const { rows } = await box.store.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = ANY($1::int[])`,
          [pids],
        );
        locksLeft.push(rows[0]!.n);
        return rows[0]!.n;
      };
      // New events in every account, between runs and while replicas are killed.
      const mail = async (round: number): Promise<void> => {
        for (let i = 0; i < SOURCES; i++) {
          for (let n = 0; n < 5; n++) {
            sim.account(keyOf(i)).emitContactEvent('contact.subscribed', `r${round}-${n}@example.com`);
          }
        }
      };

      const migrations = [];
      for (let i = 0; i < 2; i++) migrations.push(await runCli(['migrate'], pooled, 60_000));
      for (const m of migrations) expect(m.code, m.stderr).toBe(0);
      await advisoryLocks();
      // doctor says it talks through a pooler, and that this is supported.
      const doctor = await runCli(['doctor'], pooled, 60_000);
      const throughPooler = `${doctor.stdout}${doctor.stderr}`.includes('through a pooler or proxy');
      expect(throughPooler, doctor.stdout).toBe(true);

      const onceCodes: (number | null)[] = [];
      for (let round = 0; round < ONCE_RUNS; round++) {
        await mail(round);
        const once = await runCli(['sync', '--once'], pooled, 120_000);
        onceCodes.push(once.code);
        expect(once.code, once.stderr).toBe(0);
        expect(once.stdout + once.stderr).not.toContain('42P05');
        await advisoryLocks();
      }

      let started = 0;
      const start = (): RunningChild =>
        spawnNode([CLI, 'sync', '--watch'], { ...pooled, HOSTNAME: `pooled-${started++}` });
      const fleet = Array.from({ length: REPLICAS }, start);
      const random = seeded(SEED);
      for (let k = 0; k < KILLS; k++) {
        await sleep(between(random, 100, 600));
        if (k % 2 === 0) await mail(ONCE_RUNS + k);
        const slot = Math.floor(random() * REPLICAS);
        fleet[slot]!.signal('SIGKILL');
        await fleet[slot]!.exited;
        rec.injected++;
        fleet[slot] = start();
        await advisoryLocks();
      }
      const ends: (number | null)[] = [];
      try {
        for (let i = 0; i < SOURCES; i++) {
          const served = await readWholeFeed(sim.baseUrl, keyOf(i));
          const last = served.at(-1)!.id;
          await waitFor(
            async () => {
              const { rows } = await box.store.pool.query<{ after_id: string | null }>(
                `SELECT after_id FROM "${box.schema}".cursors WHERE source = $1`,
                [`acct-${i}`],
              );
              return rows[0]?.after_id === last;
            },
            { what: `acct-${i} caught up through the pooler`, timeoutMs: 120_000 },
          );
        }
        await waitFor(
          async () => {
            const { rows } = await box.store.pool.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM "${box.schema}".outbox WHERE published_at IS NULL`,
            );
            return rows[0]!.n === 0;
          },
          { what: 'the outbox drained', timeoutMs: 60_000 },
        );
      } finally {
        // A replica started at the last kill may still be starting: SIGTERM it once its loop runs.
        for (const r of fleet) {
          await waitFor(() => r.stdout().includes('"watching the feeds"'), {
            what: 'a replica to start',
            timeoutMs: 60_000,
          }).catch(() => {});
          r.signal('SIGTERM');
        }
        for (const r of fleet) ends.push((await r.waitExit(30_000)).code);
      }
      await advisoryLocks();

      let stored = 0;
      for (let i = 0; i < SOURCES; i++) {
        const fate = await fateOf(box, await readWholeFeed(sim.baseUrl, keyOf(i)), `acct-${i}`);
        expect(fate).toMatchObject({ lost: 0, duplicated: 0, strangers: 0, unpublished: 0 });
        rec.checked += fate.served;
        rec.lost += fate.lost;
        rec.duplicated += fate.duplicated;
        stored += fate.stored;
      }
      rec.figures = [
        ['accounts x backlog', `${SOURCES} x ${EVENTS}`],
        ['exit codes of migrate (twice)', migrations.map((m) => m.code).join(', ')],
        ['doctor said it talks through a pooler', throughPooler ? 'yes' : 'no'],
        ['exit codes of the once runs', onceCodes.join(', ')],
        ['watch replicas started (3 + one per kill)', started],
        ['events stored, all sources', stored],
        ["advisory locks on the pooler's server connections, at each look", locksLeft.join(', ')],
        ['exit codes of the last replicas on SIGTERM', ends.join(', ')],
      ];
      expect(Math.max(...locksLeft)).toBe(0);
      for (const code of ends) expect(code).toBe(0);
    },
  );
}, 420_000);

it("42. the queues in Postgres: feedsync's statements through PgBouncer in transaction mode, the queues' connection direct", async () => {
  const PG_REPLICAS = 2;
  const PG_KILLS = 3;
  await measured(
    {
      item: 42,
      title: 'through PgBouncer, the queues in Postgres',
      claim:
        "With QUEUE_BACKEND=postgres, feedsync's own statements go through a transaction pooler while the " +
        "queues' connection (QUEUE_DATABASE_URL) goes to Postgres directly: migrate, once runs and watch " +
        'replicas killed with SIGKILL store and enqueue each event exactly once; `doctor` fails the queues ' +
        'connection when QUEUE_DATABASE_URL is the pooler, saying why.',
      method:
        `The PgBouncer of item 19 (\`pool_mode = transaction\`); DATABASE_URL through it, QUEUE_DATABASE_URL direct, a queues' ` +
        `schema migrated by \`feedsync migrate\` (through the pooler for feedsync's tables). \`feedsync doctor\` with ` +
        `QUEUE_DATABASE_URL at the pooler too; a \`sync --once\` over ${SOURCES} accounts, then ${PG_REPLICAS} \`sync --watch\` ` +
        `replicas, ${PG_KILLS} of them killed with SIGKILL and restarted while more mail comes; each account is then ` +
        "compared with its feed, its jobs read from BullMQ's job table.",
    },
    async (rec) => {
      rec.injectedWhat = 'SIGKILLs';
      const box = await sandbox('pgbouncer_pgq', { migrate: false, queueUrl: TEST_DATABASE_URL });
      const env: Record<string, string> = {};
      const sources = Array.from({ length: SOURCES }, (_, i) => {
        env[`KEY_${i}`] = keyOf(i);
        return { source: `acct-${i}`, api_key_env: `KEY_${i}` };
      });
      const file = join(dir, 'sources-pgq.json');
      writeFileSync(file, JSON.stringify({ sources }));
      const pooled = box.env(sim.baseUrl, {
        ...env,
        DATABASE_URL: bouncer.url,
        FEED_SOURCES_FILE: file,
        FEED_PAGE_LIMIT: '20',
        SYNC_CONCURRENCY: '3',
        SYNC_INTERVAL_MS: '200',
        SOURCE_LEASE_MS: String(LEASE_MS),
        METRICS_PORT: '0',
        LOG_LEVEL: 'info',
      });
      const migrated = await runCli(['migrate'], pooled, 60_000);
      expect(migrated.code, migrated.stderr).toBe(0);
      const doctor = await runCli(['doctor'], { ...pooled, QUEUE_DATABASE_URL: bouncer.url }, 60_000);
      const refused = /fail\s+queues-postgres/.test(doctor.stdout);
      expect(refused, doctor.stdout).toBe(true);
      expect(doctor.stdout).toContain('session pooler');
      const direct = await runCli(['doctor'], pooled, 60_000);
      expect(direct.stdout).toMatch(/ok\s+queues-postgres/);

      const mail = (round: number): void => {
        for (let i = 0; i < SOURCES; i++) {
          for (let n = 0; n < 5; n++) {
            sim.account(keyOf(i)).emitContactEvent('contact.subscribed', `q${round}-${n}@example.com`);
          }
        }
      };
      mail(0);
      const once = await runCli(['sync', '--once'], pooled, 120_000);
      expect(once.code, once.stderr).toBe(0);
      let started = 0;
      const start = (): RunningChild =>
        spawnNode([CLI, 'sync', '--watch'], { ...pooled, HOSTNAME: `pgq-${started++}` });
      const fleet = Array.from({ length: PG_REPLICAS }, start);
      const random = seeded(SEED + 42);
      for (let k = 0; k < PG_KILLS; k++) {
        await sleep(between(random, 100, 600));
        mail(k + 1);
        const slot = Math.floor(random() * PG_REPLICAS);
        fleet[slot]!.signal('SIGKILL');
        await fleet[slot]!.exited;
        rec.injected++;
        fleet[slot] = start();
      }
      try {
        for (let i = 0; i < SOURCES; i++) {
          const last = (await readWholeFeed(sim.baseUrl, keyOf(i))).at(-1)!.id;
          await waitFor(
            async () => {
              const { rows } = await box.store.pool.query<{ after_id: string | null }>(
                `SELECT after_id FROM "${box.schema}".cursors WHERE source = $1`,
                [`acct-${i}`],
              );
              return rows[0]?.after_id === last;
            },
            { what: `acct-${i} caught up`, timeoutMs: 120_000 },
          );
        }
        await waitFor(
          async () => {
            const { rows } = await box.store.pool.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM "${box.schema}".outbox WHERE published_at IS NULL`,
            );
            return rows[0]!.n === 0;
          },
          { what: 'the outbox drained', timeoutMs: 60_000 },
        );
      } finally {
        for (const r of fleet) {
          await waitFor(() => r.stdout().includes('"watching the feeds"'), {
            what: 'a replica to start',
            timeoutMs: 60_000,
          }).catch(() => {});
          r.signal('SIGTERM');
        }
        for (const r of fleet) await r.waitExit(30_000);
      }
      for (let i = 0; i < SOURCES; i++) {
        const fate = await fateOf(box, await readWholeFeed(sim.baseUrl, keyOf(i)), `acct-${i}`);
        expect(fate).toMatchObject({ lost: 0, duplicated: 0, strangers: 0, unpublished: 0 });
        rec.checked += fate.served;
        rec.lost += fate.lost;
        rec.duplicated += fate.duplicated;
      }
      rec.figures = [
        ['doctor with QUEUE_DATABASE_URL at the pooler', refused ? 'queues-postgres fails' : 'passes'],
        ['watch replicas started', started],
      ];
    },
  );
});
