import { afterAll, expect, it } from 'vitest';
import { TEST_DATABASE_URL } from '../support/postgres.js';
import { CLI, killChildren, runCli, spawnNode, waitFor } from '../support/processes.js';
import { fateOfFeed, simulators } from './support/fed-by-simulator.js';
import { measured } from './support/results.js';
import { useSandboxes } from './support/sandbox.js';
import { type StallingProxy, startStallingProxy } from './support/stalling-proxy.js';

const EVENTS = 6_000;
const ONCE_MAX_MS = 8_000;
const DEADLINE_MS = 2_000;
/** Generous bound for a loaded machine: a run that outlasts it hangs. */
const RUN_BOUND_MS = 120_000;
const sandbox = useSandboxes();
const sims = simulators();
let proxy: StallingProxy | undefined;
afterAll(async () => {
  await killChildren();
  await sims.closeAll();
  proxy?.resume();
  await proxy?.close();
});

it('45. A Postgres connection that stops answering mid-run: the statement fails at its deadline, the run ends, nothing lost', async () => {
  await measured(
    {
      item: 45,
      title: 'a Postgres connection frozen mid-statement',
      claim:
        'A connection that stops answering after it was made (a stuck backend, a dropped flow) while new ' +
        'connections still work holds no run: its statement fails at DATABASE_STATEMENT_TIMEOUT_MS, the ' +
        'connection is dropped, the turn fails and gives its lease back, and a once run ends within ' +
        'SYNC_ONCE_MAX_MS plus one deadline with a non-zero exit; the next run stores and publishes every event once.',
      method:
        `A TCP proxy in front of the real Postgres; \`feedsync sync --once\` of ${EVENTS.toLocaleString('en-US')} ` +
        `events through it with SYNC_ONCE_MAX_MS=${ONCE_MAX_MS} and DATABASE_STATEMENT_TIMEOUT_MS=${DEADLINE_MS}; ` +
        'once a third are stored, every connection open at that moment is frozen (bytes held, sockets open), ' +
        'new ones pass; then a run straight to Postgres.',
    },
    async (rec) => {
      rec.injectedWhat = 'frozen connections';
      const sim = await sims.start(EVENTS, 1);
      const box = await sandbox('pg_frozen');
      const target = new URL(TEST_DATABASE_URL);
      proxy = await startStallingProxy({ host: target.hostname, port: Number(target.port || 5432) });
      const proxied = new URL(TEST_DATABASE_URL);
      proxied.host = `127.0.0.1:${proxy.port}`;
      const env = box.env(sim.baseUrl, {
        DATABASE_URL: proxied.toString(),
        SYNC_ONCE_MAX_MS: String(ONCE_MAX_MS),
        DATABASE_STATEMENT_TIMEOUT_MS: String(DEADLINE_MS),
      });
      const stored = async () =>
        Number(
          (await box.store.pool.query<{ n: string }>(`SELECT count(*) AS n FROM "${box.schema}".events`))
            .rows[0]?.n,
        );

      const run = spawnNode([CLI, 'sync', '--once'], env);
      const started = performance.now();
      await waitFor(async () => (await stored()) >= EVENTS / 3, {
        timeoutMs: RUN_BOUND_MS,
        what: 'a third of the events stored',
      });
      proxy.freezeOpen();
      rec.injected++;
      const frozenAt = performance.now();
      const frozenRun = await run.waitExit(RUN_BOUND_MS);
      const endedMs = Math.round(performance.now() - frozenAt);
      const runMs = Math.round(performance.now() - started);
      const storedThen = await stored();

      const last = await runCli(['sync', '--once'], box.env(sim.baseUrl), RUN_BOUND_MS);
      const fate = await fateOfFeed(box, sim);

      rec.checked = fate.served;
      rec.lost = fate.lost;
      rec.duplicated = fate.duplicated;
      rec.figures = [
        [
          'frozen run: exit code / time from the freeze to its exit / whole run',
          `${frozenRun.code} / ${endedMs} ms / ${runMs} ms`,
        ],
        ['events stored when it ended', storedThen],
        ['next run: exit code', last.code ?? 'signal'],
        ['jobs in BullMQ', fate.jobs],
      ];

      expect(frozenRun.code, frozenRun.stderr).not.toBe(0);
      expect(frozenRun.signal).toBeNull();
      // The deadline's whole point: the run ends by its own limit plus one statement's deadline, not when the flow resumes.
      expect(runMs).toBeLessThan(ONCE_MAX_MS + DEADLINE_MS + 5_000);
      expect(last.code, last.stderr).toBe(0);
      expect(fate).toMatchObject({ lost: 0, duplicated: 0, strangers: 0, unpublished: 0, jobs: EVENTS });
    },
  );
}, 600_000);
