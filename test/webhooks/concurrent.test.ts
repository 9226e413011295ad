import type { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/db.js';
import type { WebhookService } from '../../src/webhooks/webhook-service.js';
import { testConfig } from '../support/config.js';
import { uniqueSchema } from '../support/postgres.js';
import { uniquePrefix } from '../support/redis.js';
import {
  captureLogger,
  count,
  deliver,
  emailEvent,
  jobIds,
  SECRET_NEW,
  SECRET_OLD,
  startTestReceiver,
  type TestReceiver,
} from './helpers.js';

const schema = uniqueSchema('wh_concurrent');
const prefix = uniquePrefix('wh-concurrent');
const config = testConfig({ schema, prefix }, { WEBHOOK_SECRET: `${SECRET_OLD},${SECRET_NEW}` });
const logs = captureLogger();
let rx: TestReceiver;
let store: Store;
let service: WebhookService;
let pool: Pool;

beforeAll(async () => {
  // Bounded: at most 48 sockets; the rest of the 2,000 wait in the pool's queue.
  rx = await startTestReceiver(config, logs.logger, { connections: 48, schema, prefix });
  ({ store, service, pool } = rx);
});
afterAll(() => rx?.close());

const TYPES = ['email.sent', 'email.delivered', 'email.bounced', 'contact.subscribed', 'webhook.test'];

/** A small seeded generator, so a failure can be replayed. */
function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1_664_525 + 1_013_904_223) >>> 0;
    return s / 2 ** 32;
  };
}

describe('serve-webhooks under load', () => {
  it('2,000 concurrent deliveries, 500 of them duplicates: every event stored once, each job added once', async () => {
    const random = seeded(42);
    const unique = Array.from({ length: 1_500 }, (_, i) => {
      const type = TYPES[i % TYPES.length]!;
      return emailEvent(type, type.startsWith('contact') ? { data: { email: `c${i}@example.com` } } : {});
    });
    const bodies = unique.map((e) => JSON.stringify(e));
    const deliveries = bodies.map((body) => ({ body, secret: SECRET_NEW }));
    // Duplicates: the same bytes again, half of them signed with the other secret of the rotation.
    for (let i = 0; i < 500; i++) {
      const body = bodies[Math.floor(random() * bodies.length)]!;
      deliveries.push({ body, secret: i % 2 === 0 ? SECRET_OLD : SECRET_NEW });
    }
    for (let i = deliveries.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [deliveries[i], deliveries[j]] = [deliveries[j]!, deliveries[i]!];
    }

    const answers = await Promise.all(deliveries.map((d) => deliver(pool, d.body, d.secret)));

    expect(answers.filter((a) => a.status !== 200).map((a) => a.status)).toEqual([]);
    const firsts = answers.filter((a) => a.body.duplicate === false).map((a) => a.body.id as string);
    expect(firsts).toHaveLength(1_500);
    expect(new Set(firsts).size).toBe(1_500);
    expect(answers.filter((a) => a.body.duplicate === true)).toHaveLength(500);

    const { rows } = await store.pool.query<{ n: number; d: number; webhook: number }>(
      `SELECT count(*)::int AS n, count(DISTINCT id)::int AS d,
              count(*) FILTER (WHERE received_via = 'webhook')::int AS webhook
         FROM "${schema}".events`,
    );
    expect(rows[0]).toEqual({ n: 1_500, d: 1_500, webhook: 1_500 });

    const routed = unique.filter((e) => e.type !== 'webhook.test');
    expect(await count(store, 'outbox')).toBe(routed.length);
    await service.relay.drain();
    expect(await count(store, 'outbox', 'published_at IS NULL')).toBe(0);
    const jobs = [
      ...(await jobIds(prefix, config.queues.emailEvents)),
      ...(await jobIds(prefix, config.queues.contactEvents)),
    ];
    expect(jobs).toHaveLength(routed.length);
    expect(new Set(jobs)).toEqual(new Set(routed.map((e) => `default/${e.id}`)));
  }, 120_000);
});
