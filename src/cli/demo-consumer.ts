import type { PoolClient } from 'pg';
import type { ConsumerQueues } from '../compose/queue-store.js';
import { createConsumer, type FeedsyncEvent } from '../consumer/index.js';
import type { Logger } from '../logger.js';
import type { Publisher } from '../queue/publisher.js';
import { defaultSleep as sleep } from '../sleep.js';
import type { Store } from '../store/db.js';
import { appEventsByType, createAppEvents, recordAppEvent } from '../store/demo.js';

/** The longest the demo waits for its consumer to take every job. */
const WAIT_MS = 30_000;

/**
 * The other end of the demo's queues: a consumer (feedsync/consumer) that keeps an
 * application table of its own in the demo's schema, one plain INSERT per event,
 * applied once through the inbox. Runs until the queues hold nothing left to do.
 * Returns the table's rows by type, and how many jobs ran.
 */
export async function consumeDemoJobs(opts: {
  store: Store;
  prefix: string;
  /** How the consumer reaches the queues, as their store says: nothing more in Redis; in Postgres, a pool and no Redis. */
  queuesAt: ConsumerQueues;
  queues: readonly string[];
  publisher: Publisher;
  logger: Logger;
}): Promise<{ applied: Map<string, number>; completed: number }> {
  const { store } = opts;
  await createAppEvents(store);
  const record = async (event: FeedsyncEvent, db: PoolClient): Promise<void> => {
    // An email event's, checked a string by the consumer; a contact event has none.
    const emailId =
      'email_id' in event.data && typeof event.data.email_id === 'string' ? event.data.email_id : null;
    await recordAppEvent(db, store.schema, { source: event.source, id: event.id, type: event.type, emailId });
  };
  const consumer = createConsumer({
    name: 'demo',
    pool: store.pool,
    schema: store.schema,
    queues: { prefix: opts.prefix },
    ...opts.queuesAt,
    logger: opts.logger,
    handlers: {
      'email.sent': record,
      'email.delivered': record,
      'email.bounced': record,
      'email.complained': record,
      'email.failed': record,
      'contact.subscribed': record,
      'contact.unsubscribed': record,
    },
  });
  await consumer.migrate();
  const running = consumer.run();
  let completed = 0;
  try {
    const deadline = Date.now() + WAIT_MS;
    for (;;) {
      const counts = await Promise.all(opts.queues.map((q) => opts.publisher.counts(q)));
      const left = counts.reduce((n, c) => n + (c.waiting ?? 0) + (c.active ?? 0) + (c.delayed ?? 0), 0);
      completed = counts.reduce((n, c) => n + (c.completed ?? 0), 0);
      if (left === 0 || Date.now() > deadline) break;
      await sleep(100);
    }
  } finally {
    await consumer.close();
    await running;
  }
  return { applied: await appEventsByType(store), completed };
}
