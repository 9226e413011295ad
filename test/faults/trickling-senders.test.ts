import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from 'vitest';
import { killChildren, spawnNode, waitFor } from '../support/processes.js';
import {
  deliverSigned,
  memoryMb,
  receiverMemoryLimitMb,
  refusedFor,
  startReceiverChild,
  storedIds,
} from './support/receiver-child.js';
import { measured } from './support/results.js';
import { useSandboxes } from './support/sandbox.js';

const TRICKLER = fileURLToPath(new URL('./children/trickling-senders.mjs', import.meta.url));
const sandbox = useSandboxes();
const SECRET = 'whsec_trickling_senders_0123456789';
/** The receiver's connection cap (receiver-server.ts's default). */
const CAP = 1024;
const DECLARED = 262_144;
/** A byte every 2 s from each sender. */
const TRICKLE_MS = 2_000;
/** Valid deliveries, one a second while the senders trickle: past the 10 s after which a body must keep its minimum rate. */
const DELIVERIES = 16;
/** What a signed delivery may wait for its 200 (the bound). */
const ANSWER_BOUND_MS = 2_000;
afterAll(async () => {
  await killChildren();
});

for (const variant of [
  { item: 30, senders: 800, reopen: false, label: 'trickle', title: 'trickling senders' },
  {
    item: 31,
    senders: 800,
    reopen: true,
    label: 'trickle_reopen',
    title: 'trickling senders that come back',
  },
  {
    item: 32,
    senders: 2000,
    reopen: false,
    label: 'trickle_cap',
    title: 'more trickling senders than connections',
  },
]) {
  const SENDERS = variant.senders;
  const reopening = variant.reopen ? ', reopening each connection the receiver closes' : '';
  it(`${variant.item}. ${SENDERS} senders trickle their bodies${reopening}: every signed delivery is answered 200 within ${ANSWER_BOUND_MS / 1000} s`, async () => {
    await measured(
      {
        item: variant.item,
        title: variant.title,
        claim:
          `${SENDERS.toLocaleString('en-US')} senders that declare a full body and send a byte every ` +
          `${TRICKLE_MS / 1000} s${reopening} never keep a signed delivery from its 200: bytes are reserved as ` +
          'they arrive, not as declared, each body must keep a minimum rate, and one that trickles is closed (408) ' +
          'and counted in `feedsync_webhook_refused_total{reason="slow_body"}`' +
          (SENDERS > CAP
            ? `; past ${CAP.toLocaleString('en-US')} connections the oldest one still sending its request is closed ` +
              'to make room (`reason="connections"`), so a delivery that comes whole is still read'
            : '') +
          '; the receiver stays under the memory limit of its Deployment.',
        method:
          `${SENDERS.toLocaleString('en-US')} connections to \`feedsync serve-webhooks\` (the built CLI, plain ` +
          '`node`) that each declare ' +
          `Content-Length ${DECLARED.toLocaleString('en-US')} and send one byte every ${TRICKLE_MS / 1000} s` +
          `${variant.reopen ? ', each opened again as soon as the receiver closes it' : ''}; meanwhile ` +
          `${DELIVERIES} signed deliveries, one a second, each sent once (no retry). Memory from /proc of the ` +
          'receiver process; the limit read from k8s/overlays/webhooks/deployment.yaml.',
      },
      async (rec) => {
        rec.injectedWhat = variant.reopen
          ? 'trickling connections (reopened included)'
          : 'trickling connections';
        const box = await sandbox(variant.label);
        const { child, port, metricsPort } = await startReceiverChild(box, SECRET);
        const idleMb = memoryMb(child.pid, 'VmRSS');
        const limitMb = receiverMemoryLimitMb();
        // The same deliveries with no sender around, once the receiver is warm (its first
        // delivery opens the pool): how fast this machine answers now, for comparison.
        await deliverSigned(port, `evt_${variant.label}_warm`, SECRET);
        const baseline: number[] = [];
        for (let i = 0; i < 5; i++) {
          baseline.push((await deliverSigned(port, `evt_${variant.label}_alone_${i}`, SECRET)).ms);
        }
        const senders = spawnNode([TRICKLER], {
          PORT: String(port),
          SENDERS: String(SENDERS),
          DECLARED: String(DECLARED),
          TRICKLE_MS: String(TRICKLE_MS),
          REOPEN: variant.reopen ? '1' : '0',
        });
        await waitFor(async () => senders.stdout().startsWith('ready'), {
          timeoutMs: 30_000,
          what: 'the senders to connect',
        });

        const ids: string[] = [];
        const answers: { status: number; ms: number }[] = [];
        const inFlight: Promise<void>[] = [];
        for (let i = 0; i < DELIVERIES; i++) {
          await new Promise((resolve) => setTimeout(resolve, 1_000));
          const id = `evt_${variant.label}_${i}`;
          ids.push(id);
          inFlight.push(deliverSigned(port, id, SECRET).then((a) => void answers.push(a)));
        }
        await Promise.all(inFlight);
        const heldMb = memoryMb(child.pid, 'VmRSS');
        const peakMb = memoryMb(child.pid, 'VmHWM');
        senders.signal('SIGTERM');
        const { stdout } = await senders.waitExit(10_000);
        const {
          opened,
          closedByReceiver,
          peakOpen,
          answers: closes,
        } = JSON.parse(stdout.split('\n').at(-2) ?? '{}') as {
          opened: number;
          closedByReceiver: number;
          peakOpen: number;
          answers: Record<string, number>;
        };
        // Read after the senders are gone: every close they saw has been counted by then.
        const slowBodies = await refusedFor(metricsPort, 'slow_body');
        const evicted = await refusedFor(metricsPort, 'connections');
        const otherRefusals = await Promise.all(
          ['timeout', 'bad_request', 'busy'].map((r) => refusedFor(metricsPort, r)),
        );
        rec.injected = opened;
        const stored = await storedIds(box);
        child.signal('SIGTERM');
        await child.waitExit(30_000);

        const ok = answers.filter((a) => a.status === 200);
        const times = answers.map((a) => a.ms).sort((a, b) => a - b);
        const slowest = times.at(-1) ?? 0;
        rec.checked = ids.length;
        rec.lost = ids.filter((id) => !stored.has(id)).length;
        rec.duplicated =
          [...stored.values()].filter((n) => n > 1).length + (stored.size - ids.length - baseline.length - 1);
        rec.figures = [
          ['signed deliveries answered 200, each sent once', `${ok.length} of ${answers.length}`],
          ['slowest answer to a signed delivery', `${slowest} ms`],
          ['median answer to a signed delivery', `${times[Math.floor(times.length / 2)] ?? 0} ms`],
          ['slowest of 5 answered before the senders came, the receiver warm', `${Math.max(...baseline)} ms`],
          ['trickling connections open at once, at most', peakOpen],
          ['trickling connections closed by the receiver', closedByReceiver],
          [
            'what they were answered before the close',
            Object.entries(closes)
              .map(([answer, n]) => `${answer}: ${n}`)
              .join('; '),
          ],
          ['closed for their pace (feedsync_webhook_refused_total slow_body)', slowBodies],
          ['closed past the connection cap to make room (connections)', evicted],
          ['other refusals (timeout, bad_request, busy)', otherRefusals.join(', ')],
          ['receiver memory idle (RSS)', `${idleMb} MB`],
          [`receiver memory after ${DELIVERIES} s of senders (RSS)`, `${heldMb} MB`],
          ['receiver peak memory (VmHWM)', `${peakMb} MB`],
          ['memory limit of the serve-webhooks Deployment', `${limitMb} MiB`],
        ];
        expect(ok).toHaveLength(DELIVERIES);
        // The bound, unless this machine is so loaded that it answers slower than half
        // of it with no sender at all: then twice what it takes alone.
        expect(slowest).toBeLessThan(Math.max(ANSWER_BOUND_MS, 2 * Math.max(...baseline)));
        expect(rec.lost).toBe(0);
        expect(rec.duplicated).toBe(0);
        // Every sender of the first wave was cut, for its pace or past the cap, and each one counted.
        expect(slowBodies + evicted).toBeGreaterThanOrEqual(SENDERS);
        expect(slowBodies + evicted).toBeGreaterThanOrEqual(closedByReceiver);
        expect(evicted).toBeGreaterThanOrEqual(Math.max(0, SENDERS - CAP));
        expect(peakMb).toBeLessThan(limitMb * 1.048576);
      },
    );
  }, 120_000);
}
