import { Queue } from 'bullmq';
import type { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WebhookService } from '../../src/webhooks/webhook-service.js';
import { testConfig } from '../support/config.js';
import { uniqueSchema } from '../support/postgres.js';
import { waitFor } from '../support/processes.js';
import { between, seeded } from '../support/random.js';
import { TEST_REDIS_URL, uniquePrefix } from '../support/redis.js';
import {
  captureLogger,
  deliver,
  emailEvent,
  SECRET_NEW,
  startTestReceiver,
  type TestReceiver,
} from './helpers.js';

const schema = uniqueSchema('wh_burst');
const prefix = uniquePrefix('wh-burst');
const config = testConfig({ schema, prefix }, { WEBHOOK_SECRET: SECRET_NEW });
const logs = captureLogger();
const ROUNDS = 8;
const EVENTS = 200;
const COPIES = 5;
// Past the test's own length: a job that waited for the sweep would never come in time.
const NO_SWEEP_MS = 30 * 60_000;
let rx: TestReceiver;
let service: WebhookService;
let pool: Pool;
let queues: Queue[];

beforeAll(async () => {
  rx = await startTestReceiver(config, logs.logger, {
    connections: EVENTS * COPIES,
    schema,
    prefix,
    relaySweepMs: NO_SWEEP_MS,
  });
  ({ service, pool } = rx);
  queues = [config.queues.emailEvents, config.queues.contactEvents].map(
    (name) => new Queue(name, { connection: { url: TEST_REDIS_URL }, prefix }),
  );
});
afterAll(async () => {
  for (const q of queues ?? []) await q.close();
  await rx?.close();
});

/** Jobs in both queues, waiting (nothing consumes them). */
async function jobsWaiting(): Promise<number> {
  const counts = await Promise.all(queues.map((q) => q.getJobCountByTypes('waiting')));
  return counts.reduce((a, b) => a + b, 0);
}

/** A seeded shuffle, so a failure can be replayed. */
function shuffle<T>(list: T[], seed: number): T[] {
  const random = seeded(seed);
  for (let i = list.length - 1; i > 0; i--) {
    const j = between(random, 0, i);
    [list[i], list[j]] = [list[j]!, list[i]!];
  }
  return list;
}

describe('serve-webhooks under a burst of concurrent deliveries', () => {
  // Concurrent commits hand their rows to the relay out of seq order while duplicates kick
  // it to read the outbox: rows that fell between the two paths waited for the sweep.
  it(`publishes every stored delivery's job without waiting for a sweep (${ROUNDS} rounds of ${EVENTS} events × ${COPIES})`, async () => {
    const delays: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const types = ['email.sent', 'email.delivered', 'email.bounced', 'contact.subscribed'];
      const bodies = Array.from({ length: EVENTS }, (_, i) => {
        const type = types[i % types.length]!;
        return JSON.stringify(
          emailEvent(type, type.startsWith('contact') ? { data: { email: `c${i}@example.com` } } : {}),
        );
      });
      const deliveries = shuffle(
        bodies.flatMap((body) => Array.from({ length: COPIES }, () => body)),
        round + 1,
      );
      const answers = await Promise.all(deliveries.map((body) => deliver(pool, body)));
      const lastAnswer = performance.now();
      expect(answers.filter((a) => a.status !== 200).map((a) => a.status)).toEqual([]);
      expect(answers.filter((a) => a.body.duplicate === false)).toHaveLength(EVENTS);

      // Bounded far below the sweep: every job comes from an offer or a kick, or not at all.
      const expected = (round + 1) * EVENTS;
      await waitFor(async () => (await jobsWaiting()) === expected, {
        timeoutMs: 60_000,
        what: `round ${round + 1}: ${expected} jobs in BullMQ`,
      });
      delays.push(performance.now() - lastAnswer);
    }
    expect(await jobsWaiting()).toBe(ROUNDS * EVENTS);
    const sorted = [...delays].sort((a, b) => a - b);
    console.log(
      `burst: last 200 answer to every job in BullMQ, ms: median ${Math.round(sorted[ROUNDS >> 1]!)}, ` +
        `max ${Math.round(sorted.at(-1)!)} over ${ROUNDS} rounds`,
    );
    // The relay's own measure of it, per job, from commit to publication.
    const text = await service.metrics.registry.metrics();
    const count = /feedsync_publish_delay_seconds_count (\d+)/.exec(text)?.[1];
    expect(Number(count)).toBe(ROUNDS * EVENTS);
  }, 300_000);
});
