import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, expect, it } from 'vitest';
import type { Simulator } from '../../src/simulator/index.js';
import { freePort, killChildren } from '../support/processes.js';
import { startTestSimulator } from '../support/simulator.js';
import { fateOfFeed } from './support/fed-by-simulator.js';
import { measured } from './support/results.js';
import { useSandboxes } from './support/sandbox.js';
import { timedCli } from './support/timed-cli.js';

const BACKLOG = 500;
const sandbox = useSandboxes();
let sim: Simulator | undefined;
afterAll(async () => {
  await killChildren();
  await sim?.close();
});

/** The retry lines a run logged (JSON lines on stdout with a wait). */
function retries(stdout: string): number {
  return stdout.split('\n').filter((l) => l.startsWith('{') && l.includes('"waitMs"')).length;
}

it('23. a feed that refuses the connection or speaks no TLS: told within seconds, the cursor kept', async () => {
  await measured(
    {
      item: 23,
      title: 'a feed that refuses the connection, or https to an http server',
      claim:
        'A refused connection is retried 3 times at most, each wait at most 1 s, then the run fails (exit 1) with the ' +
        'cursor where it was; https:// to a server that speaks http is not retried at all. Once the feed answers, the ' +
        'next run stores every event once.',
      method:
        '`feedsync sync --once` and `feedsync webhooks list` through the CLI with the default FEED_MAX_RETRIES (8): ' +
        'against a loopback port nothing listens on, and with https:// against a plain-http server. Then the ' +
        `simulator (backlog ${BACKLOG}) starts on the refused port and the same sandbox syncs again.`,
    },
    async (rec) => {
      rec.injectedWhat = 'unreachable feeds';
      const box = await sandbox('feed_unreachable');
      const port = await freePort();
      const closed = `http://127.0.0.1:${port}/api`;
      const plain = createServer((_req, res) => res.end('{}'));
      await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
      const tls = `https://127.0.0.1:${(plain.address() as AddressInfo).port}/api`;
      const info = { LOG_LEVEL: 'info' };
      try {
        const refusedSync = await timedCli(['sync', '--once'], box.env(closed, info));
        const refusedList = await timedCli(['webhooks', 'list'], box.env(closed, info));
        const tlsSync = await timedCli(['sync', '--once'], box.env(tls, info));
        const tlsList = await timedCli(['webhooks', 'list'], box.env(tls, info));
        rec.injected = 4;
        const moved = await box.store.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM "${box.schema}".cursors WHERE after_id IS NOT NULL`,
        );
        const cursorsMoved = moved.rows[0]?.n ?? 0;

        sim = await startTestSimulator({ port, backlog: BACKLOG });
        const after = await timedCli(['sync', '--once'], box.env(sim.baseUrl));
        const fate = await fateOfFeed(box, sim);
        rec.checked = fate.served;
        rec.lost = fate.lost;
        rec.duplicated = fate.duplicated;
        rec.figures = [
          [
            'refused, sync --once: exit / retries / wall time incl. start-up',
            `${refusedSync.code} / ${retries(refusedSync.stdout)} / ${refusedSync.ms} ms`,
          ],
          [
            'refused, webhooks list: exit / retries / wall time',
            `${refusedList.code} / ${retries(refusedList.stdout)} / ${refusedList.ms} ms`,
          ],
          [
            'https to http, sync --once: exit / retries / wall time',
            `${tlsSync.code} / ${retries(tlsSync.stdout)} / ${tlsSync.ms} ms`,
          ],
          [
            'https to http, webhooks list: exit / retries / wall time',
            `${tlsList.code} / ${retries(tlsList.stdout)} / ${tlsList.ms} ms`,
          ],
          ['cursors moved by the failed runs', cursorsMoved],
          ['the run once the feed answers: exit', String(after.code)],
        ];

        expect([refusedSync.code, refusedList.code, tlsSync.code, tlsList.code]).toEqual([1, 1, 1, 1]);
        expect([retries(refusedSync.stdout), retries(refusedList.stdout)]).toEqual([3, 3]);
        expect([retries(tlsSync.stdout), retries(tlsList.stdout)]).toEqual([0, 0]);
        expect(tlsSync.stderr).toContain('https:// to a server that speaks http?');
        expect(cursorsMoved).toBe(0);
        expect(after.code, after.stderr).toBe(0);
        expect(fate).toMatchObject({ served: BACKLOG, lost: 0, duplicated: 0 });
      } finally {
        await new Promise<void>((resolve) => plain.close(() => resolve()));
      }
    },
  );
});
