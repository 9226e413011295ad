import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from 'vitest';
import { killChildren, spawnNode, waitFor } from '../support/processes.js';
import {
  deliverSigned,
  memoryMb,
  receiverMemoryLimitMb,
  startReceiverChild,
  storedIds,
} from './support/receiver-child.js';
import { measured } from './support/results.js';
import { useSandboxes } from './support/sandbox.js';

const FLOOD = fileURLToPath(new URL('./children/unsigned-flood.mjs', import.meta.url));
const sandbox = useSandboxes();
const SECRET = 'whsec_unsigned_flood_0123456789';
const BODY = 262_144;
/** 128 bodies of 256 KiB a second: about 32 MiB/s, the receiver's whole budget every second. */
const SENDERS = 128;
const CYCLE_MS = 1_000;
/** Valid deliveries, one a second while the flood runs. */
const DELIVERIES = 20;
const ANSWER_BOUND_MS = 2_000;
afterAll(async () => {
  await killChildren();
});

it(`44. a flood of unsigned 256 KiB bodies at about 32 MiB/s: every signed delivery is answered 200 within ${ANSWER_BOUND_MS / 1000} s`, async () => {
  await measured(
    {
      item: 44,
      title: 'a flood of unsigned bodies',
      claim:
        `${SENDERS} senders that each post an unsigned body of 256 KiB, close the connection within a second and ` +
        'send again (about 32 MiB/s, the body budget every second) never keep a signed delivery from its 200: a ' +
        'signature header that can never verify (none, malformed, stale) is answered 401 from the headers, before ' +
        'any byte of its body is held, so the budget stays for deliveries whose header may verify.',
      method:
        `${SENDERS} loops in a process of their own, each opening a connection to \`feedsync serve-webhooks\` (the ` +
        `built CLI, plain \`node\`), sending an unsigned POST with a ${BODY.toLocaleString('en-US')}-byte body at ` +
        `once, closing it ${CYCLE_MS} ms after it opened (sooner when the receiver closes it) and starting again; ` +
        `meanwhile ${DELIVERIES} signed deliveries, one a second, each sent once (no retry).`,
    },
    async (rec) => {
      rec.injectedWhat = 'unsigned requests';
      const box = await sandbox('unsigned_flood');
      const { child, port } = await startReceiverChild(box, SECRET);
      const limitMb = receiverMemoryLimitMb();
      await deliverSigned(port, 'evt_flood_warm', SECRET);
      const flood = spawnNode([FLOOD], {
        PORT: String(port),
        SENDERS: String(SENDERS),
        BODY: String(BODY),
        CYCLE_MS: String(CYCLE_MS),
      });
      await waitFor(async () => flood.stdout().startsWith('ready'), { timeoutMs: 30_000, what: 'the flood' });

      const ids: string[] = [];
      const answers: { status: number; ms: number }[] = [];
      const inFlight: Promise<void>[] = [];
      for (let i = 0; i < DELIVERIES; i++) {
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        const id = `evt_flood_${i}`;
        ids.push(id);
        inFlight.push(deliverSigned(port, id, SECRET).then((a) => void answers.push(a)));
      }
      await Promise.all(inFlight);
      const peakMb = memoryMb(child.pid, 'VmHWM');
      flood.signal('SIGTERM');
      const { stdout } = await flood.waitExit(10_000);
      const sent = JSON.parse(stdout.split('\n').at(-2) ?? '{}') as {
        requests: number;
        bytesSent: number;
        answers: Record<string, number>;
      };
      rec.injected = sent.requests;
      const stored = await storedIds(box);
      child.signal('SIGTERM');
      await child.waitExit(30_000);

      const ok = answers.filter((a) => a.status === 200);
      const times = answers.map((a) => a.ms).sort((a, b) => a - b);
      const slowest = times.at(-1) ?? 0;
      rec.checked = ids.length;
      rec.lost = ids.filter((id) => !stored.has(id)).length;
      rec.duplicated = [...stored.values()].filter((n) => n > 1).length + (stored.size - ids.length - 1);
      rec.figures = [
        ['signed deliveries answered 200, each sent once', `${ok.length} of ${answers.length}`],
        ['slowest answer to a signed delivery', `${slowest} ms`],
        ['median answer to a signed delivery', `${times[Math.floor(times.length / 2)] ?? 0} ms`],
        ['unsigned requests sent', sent.requests],
        [
          'unsigned bytes offered, per second',
          `${(sent.bytesSent / DELIVERIES / 1024 / 1024).toFixed(1)} MiB/s`,
        ],
        [
          'what the unsigned requests were answered',
          Object.entries(sent.answers)
            .map(([answer, n]) => `${answer}: ${n}`)
            .join('; '),
        ],
        ['receiver peak memory (VmHWM)', `${peakMb} MB`],
        ['memory limit of the serve-webhooks Deployment', `${limitMb} MiB`],
      ];
      expect(ok).toHaveLength(DELIVERIES);
      expect(slowest).toBeLessThan(ANSWER_BOUND_MS);
      expect(rec.lost).toBe(0);
      expect(rec.duplicated).toBe(0);
      expect(
        Object.keys(sent.answers).filter((a) => a !== 'HTTP/1.1 401 Unauthorized' && a !== 'none'),
      ).toEqual([]);
      expect(peakMb).toBeLessThan(limitMb * 1.048576);
    },
  );
}, 120_000);
