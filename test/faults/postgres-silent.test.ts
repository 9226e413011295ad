import { createServer, type Socket } from 'node:net';
import { afterAll, expect, it } from 'vitest';
import type { Simulator } from '../../src/simulator/index.js';
import { CLI, killChildren, runCli, spawnNode } from '../support/processes.js';
import { TEST_REDIS_URL } from '../support/redis.js';
import { startTestSimulator } from '../support/simulator.js';
import { fateOfFeed } from './support/fed-by-simulator.js';
import { sendMail } from './support/mail.js';
import { measured } from './support/results.js';
import { useSandboxes } from './support/sandbox.js';
import { timedCli } from './support/timed-cli.js';

const BACKLOG = 300;
const TIMEOUT_MS = 2_000;
const sandbox = useSandboxes();
let sim: Simulator | undefined;
afterAll(async () => {
  await killChildren();
  await sim?.close();
});

it('35. DATABASE_URL at a silent port or at another service: each command fails within its connect timeout', async () => {
  await measured(
    {
      item: 28,
      title: 'Postgres address where nothing answers, or Redis does',
      claim:
        'With DATABASE_URL at a port that accepts and never answers, or at a Redis server, `sync --once`, `migrate`, ' +
        '`status` and `serve-webhooks` each end with exit 1 within DATABASE_CONNECT_TIMEOUT_MS (plus start-up), ' +
        'with one line naming DATABASE_URL and the address; one SIGTERM during the wait is enough; nothing moves; ' +
        'the next run against the right address stores every event once.',
      method:
        `A TCP server on loopback that accepts and never sends a byte, and the shared Redis port; DATABASE_CONNECT_TIMEOUT_MS=${TIMEOUT_MS}; ` +
        `the commands through the CLI. A simulator (backlog ${BACKLOG}), a sandbox synced once before, more mail sent; ` +
        'after the failed runs, `sync --once` against the real Postgres.',
    },
    async (rec) => {
      rec.injectedWhat = 'commands run against a wrong Postgres address';
      const sockets = new Set<Socket>();
      let accepted = 0;
      const silent = createServer((socket) => {
        accepted++;
        sockets.add(socket);
        socket.on('error', () => {});
        socket.on('close', () => sockets.delete(socket));
      });
      await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
      const silentAt = `127.0.0.1:${(silent.address() as { port: number }).port}`;
      const redisAt = new URL(TEST_REDIS_URL).host;
      try {
        sim = await startTestSimulator({ backlog: BACKLOG });
        const box = await sandbox('pg_silent');
        const first = await runCli(['sync', '--once'], box.env(sim.baseUrl), 60_000);
        expect(first.code, first.stderr).toBe(0);
        const cursor = async () =>
          (
            await box.store.pool.query<{ after_id: string | null }>(
              `SELECT after_id FROM "${box.schema}".cursors WHERE source = 'default'`,
            )
          ).rows[0]?.after_id ?? null;
        const before = await cursor();
        await sendMail(sim, 'while-misaddressed');
        const wrong = (at: string) =>
          box.env(sim!.baseUrl, {
            DATABASE_URL: `postgres://postgres:pg-pw-hidden@${at}/postgres`,
            DATABASE_CONNECT_TIMEOUT_MS: String(TIMEOUT_MS),
            WEBHOOK_SECRET: 'whsec_silent',
            WEBHOOK_PORT: '0',
            METRICS_PORT: '0',
          });
        const runs: { label: string; code: number | null; ms: number; stderr: string }[] = [];
        for (const [what, at] of [
          ['silent port', silentAt],
          ['Redis port', redisAt],
        ] as const) {
          for (const args of [['sync', '--once'], ['migrate'], ['status'], ['serve-webhooks']]) {
            const res = await timedCli(args, wrong(at));
            rec.injected++;
            runs.push({
              label: `${what}, ${args.join(' ')}`,
              code: res.code,
              ms: res.ms,
              stderr: res.stderr,
            });
          }
        }
        // One SIGTERM while sync --once waits for the silent port.
        const slow = { ...wrong(silentAt), DATABASE_CONNECT_TIMEOUT_MS: '5000' };
        const opened = accepted;
        const child = spawnNode([CLI, 'sync', '--once'], slow);
        const started = performance.now();
        while (accepted === opened && performance.now() - started < 30_000) {
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        const signalled = performance.now();
        child.signal('SIGTERM');
        const stopped = await child.waitExit(30_000);
        const afterSignalMs = Math.round(performance.now() - signalled);
        rec.injected++;
        const cursorAfterFailures = await cursor();

        const again = await runCli(['sync', '--once'], box.env(sim.baseUrl), 60_000);
        const fate = await fateOfFeed(box, sim);
        rec.checked = fate.served;
        rec.lost = fate.lost;
        rec.duplicated = fate.duplicated;
        const slowest = Math.max(...runs.map((r) => r.ms));
        rec.figures = [
          ...runs.map((r): [string, string] => [
            `${r.label}: exit / wall time incl. start-up`,
            `${r.code} / ${r.ms} ms`,
          ]),
          ['slowest of them, against a deadline of', `${slowest} ms / ${TIMEOUT_MS} ms`],
          [
            'one SIGTERM during the wait (deadline 5000 ms): exit / time after the signal',
            `${stopped.code} / ${afterSignalMs} ms`,
          ],
          ['cursor moved by the failed runs', cursorAfterFailures === before ? 'no' : 'yes'],
          ['the next run at the right address: exit', String(again.code)],
        ];

        for (const r of runs) {
          expect(r.code, `${r.label}: ${r.stderr}`).toBe(1);
          // At most one line said while it waits (what for, and until when), then the failure's one line.
          const lines = r.stderr.trim().split('\n');
          expect(lines.length, r.label).toBeLessThanOrEqual(2);
          for (const early of lines.slice(0, -1))
            expect(early, r.label).toContain('waiting for Postgres at 127.0.0.1:');
          expect(lines.at(-1)).toMatch(
            /^feedsync: Postgres at 127\.0\.0\.1:\d+ \(DATABASE_URL\) did not answer within 2000 ms/,
          );
          expect(r.stderr).not.toContain('pg-pw-hidden');
          // Start-up on a shared machine plus the deadline; without it these never end.
          expect(r.ms, r.label).toBeLessThan(TIMEOUT_MS + 20_000);
        }
        expect(stopped.code, stopped.stderr).toBe(1);
        expect(afterSignalMs).toBeLessThan(5_000 + 10_000);
        expect(cursorAfterFailures).toBe(before);
        expect(again.code, again.stderr).toBe(0);
        expect(fate.served).toBeGreaterThan(BACKLOG);
        expect(fate).toMatchObject({ lost: 0, duplicated: 0 });
      } finally {
        for (const s of sockets) s.destroy();
        await new Promise<void>((resolve) => silent.close(() => resolve()));
      }
    },
  );
}, 300_000);
