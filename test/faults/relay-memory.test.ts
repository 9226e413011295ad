import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
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
import { publishedRows } from './support/failover.js';
import { fateOf } from './support/fate.js';
import { startPaddedFeed } from './support/padded-feed.js';
import { measured } from './support/results.js';
import { useSandboxes } from './support/sandbox.js';

const MiB = 1024 * 1024;
/** How long Redis stays frozen: longer than a publish's deadline (twice the 5 s command timeout). */
const FROZEN_MS = 20_000;
/** Generous bounds for a loaded machine: a run that outlasts them hangs. */
const RUN_BOUND_MS = 300_000;
/**
 * Each case: about 120 MB of events; events of 200 kB in pages of 35 (7 MB, the largest
 * under the default 8 MiB response limit), of 40 kB in pages of 100 (4 MB).
 */
const CASES = [
  { eventBytes: 200_000, pageLimit: 35, total: 595 },
  { eventBytes: 40_000, pageLimit: 100, total: 3_000 },
] as const;
const sandbox = useSandboxes();
let redis: RedisServer;
let pid: number;

/** The CronJob's memory limit, in bytes: the smallest a worker runs under (k8s/base/cronjob.yaml). */
function cronJobLimitBytes(): number {
  const text = readFileSync(new URL('../../k8s/base/cronjob.yaml', import.meta.url), 'utf8');
  const limit = /limits:\s*\n(?:\s+\w+:.*\n)*?\s+memory:\s*(\d+)Mi/.exec(text);
  if (!limit) throw new Error('k8s/base/cronjob.yaml: no memory limit found');
  return Number(limit[1]) * MiB;
}

/** A process's peak resident set so far (VmHWM), in bytes; null once it is gone. */
function peakRss(processId: number): number | null {
  try {
    const status = readFileSync(`/proc/${processId}/status`, 'utf8');
    const kb = /^VmHWM:\s+(\d+)/m.exec(status)?.[1];
    return kb === undefined ? null : Number(kb) * 1024;
  } catch {
    return null;
  }
}

beforeAll(async () => {
  redis = await startRedisServer();
  pid = Number(/^process_id:(\d+)/m.exec(await info(redis.port, 'server'))![1]);
});
afterAll(async () => {
  await killChildren();
  // A stopped process ignores SIGTERM until it is continued.
  if (pid) process.kill(pid, 'SIGCONT');
  await redis?.dispose();
});

it('32. Large events with Redis frozen mid-run: peak RSS under the CronJob limit with plain node', async () => {
  const limit = cronJobLimitBytes();
  await measured(
    {
      item: 27,
      title: 'Large events, Redis frozen, Node defaults',
      claim:
        'Every stage that holds events counts bytes (the pages fetched ahead, the load in a commit, the ' +
        "relay's offers, the batch on its way to Redis, its reads of the outbox), so a worker started as " +
        'plain `node` (no V8 flag) over events of 40 kB and 200 kB in pages of 4 and 7 MB stays under the CronJob ' +
        'memory limit with Redis frozen mid-run, and loses nothing.',
      method:
        'A private redis-server. For events of 200 kB (pages of 35, 7 MB) and of 40 kB (pages of 100), about ' +
        '120 MB of email.delivered events from a feed server of the test (node:http, events made on the fly): ' +
        '`node dist/bin/feedsync.js sync --once`, the server sent SIGSTOP once a quarter of the events were ' +
        `published and SIGCONT ${FROZEN_MS / 1000} s later; a second run when the first ended non-zero. ` +
        'Peak RSS is VmHWM from /proc/<pid>/status, read every 25 ms while the first run lives.',
    },
    async (rec) => {
      rec.injectedWhat = 'freezes';
      const peaks: number[] = [];
      for (const c of CASES) {
        const kb = c.eventBytes / 1000;
        const feed = await startPaddedFeed({ total: c.total, eventBytes: c.eventBytes });
        const box = await sandbox(`relay_mem_${kb}`, { redisUrl: redis.url });
        const env = box.env(feed.baseUrl, { FEED_PAGE_LIMIT: String(c.pageLimit) });
        try {
          const run = spawnNode([CLI, 'sync', '--once'], env);
          let peak = 0;
          const sampler = setInterval(() => {
            peak = Math.max(peak, peakRss(run.pid) ?? 0);
          }, 25);
          try {
            await waitFor(
              async () => (await publishedRows(box)) >= c.total / 4 || run.process.exitCode !== null,
              { timeoutMs: RUN_BOUND_MS, what: 'a quarter of the events published' },
            );
            expect(run.process.exitCode, 'the run ended before Redis could be frozen').toBeNull();
            process.kill(pid, 'SIGSTOP');
            rec.injected++;
            await Promise.race([sleep(FROZEN_MS), run.exited]);
            process.kill(pid, 'SIGCONT');
            const first = await run.waitExit(RUN_BOUND_MS);
            const again = first.code === 0 ? null : await runCli(['sync', '--once'], env, RUN_BOUND_MS);
            peaks.push(peak);
            const fate = await fateOf(box, feed.served);
            rec.checked += fate.served;
            rec.lost += fate.lost;
            rec.duplicated += fate.duplicated;
            rec.figures.push(
              [
                `events of ${kb} kB: peak RSS (VmHWM) of the run Redis froze`,
                `${(peak / MiB).toFixed(0)} MiB`,
              ],
              [
                `events of ${kb} kB: exit code of that run / of the run after it`,
                `${first.code ?? first.signal} / ${again ? (again.code ?? again.signal) : 'none needed'}`,
              ],
            );
            expect(again?.code ?? 0, again?.stderr).toBe(0);
            expect(fate).toMatchObject({ lost: 0, duplicated: 0, unpublished: 0, jobs: c.total });
          } finally {
            clearInterval(sampler);
          }
        } finally {
          await feed.close();
        }
      }
      rec.figures.push(['the CronJob memory limit (k8s/base/cronjob.yaml)', `${limit / MiB} MiB`]);
      for (const peak of peaks) expect(peak).toBeLessThan(limit);
    },
  );
}, 900_000);
