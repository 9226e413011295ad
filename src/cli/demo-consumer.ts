import type { Pool, PoolClient } from 'pg';
import { createConsumer, type FeedsyncEvent } from '../consumer/index.js';
import type { Logger } from '../logger.js';
import type { Publisher } from '../queue/publisher.js';
import { defaultSleep as sleep } from '../sleep.js';

/** The longest the demo waits for its consumer to take every job. */
const WAIT_MS = 30_000;

/**
 * The other end of the demo's queues: a consumer (feedsync/consumer) that keeps an
 * application table of its own in the demo's schema, one plain INSERT per event,
 * applied once through the inbox. Runs until the queues hold nothing left to do.
 * Returns the table's rows by type, and how many jobs ran.
 */
export async function consumeDemoJobs(opts: {
  pool: Pool;
  schema: string;
  prefix: string;
  queues: readonly string[];
  publisher: Publisher;
  logger: Logger;
}): Promise<{ applied: Map<string, number>; completed: number }> {
  const table = `"${opts.schema}".app_events`;
  await opts.pool.query(
    `CREATE TABLE IF NOT EXISTS ${table} (source text, event_id text, type text, email_id text)`,
  );
  // No unique key: a second effect of one event would be a second row.
  const record = async (event: FeedsyncEvent, db: PoolClient): Promise<void> => {
    const emailId = 'email_id' in event.data ? event.data.email_id : null;
    await db.query(`INSERT INTO ${table} VALUES ($1, $2, $3, $4)`, [
      event.source,
      event.id,
      event.type,
      emailId,
    ]);
  };
  const consumer = createConsumer({
    name: 'demo',
    pool: opts.pool,
    schema: opts.schema,
    queues: { prefix: opts.prefix },
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
  const { rows } = await opts.pool.query<{ type: string; n: number }>(
    `SELECT type, count(*)::int AS n FROM ${table} GROUP BY type ORDER BY type`,
  );
  return { applied: new Map(rows.map((r) => [r.type, r.n])), completed };
}
