import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  CLI,
  killChildren,
  type RedisServer,
  runCli,
  spawnNode,
  startRedisServer,
  waitFor,
} from '../support/processes.js';
import { info } from '../support/redis-topologies.js';
import { TEST_API_KEY } from '../support/simulator.js';
import { publishedRows, relayFailures, unpublishedRows } from './support/failover.js';
import { fateOfFeed, simulators } from './support/fed-by-simulator.js';
import { measured } from './support/results.js';
import { useSandboxes } from './support/sandbox.js';

const EVENTS = 20_000;
/** Generous bounds for a loaded machine: a run that outlasts them hangs. */
const RUN_BOUND_MS = 180_000;
const SIGTERM_BOUND_MS = 45_000;
const sandbox = useSandboxes();
const sims = simulators();
const dir = mkdtempSync(join(tmpdir(), 'feedsync-frozen-'));
let redis: RedisServer;
let pid: number;

beforeAll(async () => {
  redis = await startRedisServer({ persist: true });
  pid = Number(/^process_id:(\d+)/m.exec(await info(redis.port, 'server'))![1]);
});
afterAll(async () => {
  await killChildren();
  await sims.closeAll();
  // A stopped process ignores SIGTERM until it is continued.
  if (pid) process.kill(pid, 'SIGCONT');
  await redis?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

it('22. A Redis that stops answering (SIGSTOP): the run ends, SIGTERM ends it, nothing lost', async () => {
  await measured(
    {
      item: 22,
      title: 'Redis frozen mid-run',
      claim:
        'A Redis that stops answering without closing its connections (a frozen process, a half-open ' +
        'connection) hangs no run: every Redis call is bounded, the connection included, so a once run ends ' +
        'within a minute with exit 1, its events stored and the outbox left for the next run; the first ' +
        'SIGTERM ends a run within 30 s; once Redis answers again, the next run publishes every job once.',
      method:
        'A private redis-server (append-only file, fsync always). `feedsync sync --once` of ' +
        `${EVENTS.toLocaleString('en-US')} events (through a sources file of one source, the path every run ` +
        'takes), the server sent SIGSTOP once a third are published; then another run sent SIGTERM after its ' +
        'first failed publish; the server sent SIGCONT and a last run started.',
    },
    async (rec) => {
      rec.injectedWhat = 'frozen server';
      const sim = await sims.start(EVENTS, 1);
      const box = await sandbox('redis_frozen', { redisUrl: redis.url });
      const sources = join(dir, 'sources.json');
      writeFileSync(sources, JSON.stringify({ sources: [{ source: 'default' }] }));
      const env = box.env(sim.baseUrl, { FEED_SOURCES_FILE: sources });

      const run = spawnNode([CLI, 'sync', '--once', '--migrate'], env);
      await waitFor(async () => (await publishedRows(box)) >= EVENTS / 3, {
        timeoutMs: RUN_BOUND_MS,
        what: 'a third of the events published',
      });
      process.kill(pid, 'SIGSTOP');
      rec.injected++;
      const frozenAt = performance.now();
      const first = await run.waitExit(RUN_BOUND_MS);
      const firstMs = Math.round(performance.now() - frozenAt);
      const left = await unpublishedRows(box);

      const termed = spawnNode([CLI, 'sync', '--once'], env);
      await waitFor(() => termed.stdout().includes('outbox relay failed'), {
        timeoutMs: RUN_BOUND_MS,
        what: 'the first failed publish of the run to be ended by SIGTERM',
      });
      const sent = performance.now();
      termed.signal('SIGTERM');
      const term = await termed.waitExit(SIGTERM_BOUND_MS);
      const termMs = Math.round(performance.now() - sent);

      process.kill(pid, 'SIGCONT');
      const last = await runCli(['sync', '--once'], env, RUN_BOUND_MS);
      const fate = await fateOfFeed(box, sim);
      const log = [first, term, last].map((r) => `${r.stdout}${r.stderr}`).join('\n');

      rec.checked = fate.served;
      rec.lost = fate.lost;
      rec.duplicated = fate.duplicated;
      rec.figures = [
        [
          'frozen run: exit code / time from the SIGSTOP to its exit',
          `${first.code ?? 'signal'} / ${firstMs} ms`,
        ],
        [
          'frozen run: relay failures / outbox rows left for the next run',
          `${relayFailures(`${first.stdout}${first.stderr}`).failures} / ${left}`,
        ],
        [
          'run sent SIGTERM while Redis was frozen: exit code / time to exit',
          `${term.code ?? term.signal} / ${termMs} ms`,
        ],
        ['run after SIGCONT: exit code', last.code ?? 'signal'],
        ['jobs in BullMQ', fate.jobs],
      ];

      expect(log).not.toContain(TEST_API_KEY);
      expect(first.code).toBe(1);
      expect(left).toBeGreaterThan(0);
      expect(term.signal).toBeNull();
      expect(last.code, last.stderr).toBe(0);
      expect(fate).toMatchObject({ lost: 0, duplicated: 0, strangers: 0, unpublished: 0, jobs: EVENTS });
    },
  );
}, 600_000);
