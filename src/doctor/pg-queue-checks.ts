import { consumerQueueConnections, pgQueuesOf } from '../compose/queue-store.js';
import type { Config } from '../config/config-type.js';
import { CONSUMER_DEFAULTS } from '../consumer/defaults.js';
import { redactUrl } from '../logger.js';
import { PG_QUEUE_NEEDS, probeQueueConnection } from '../queue/pg-queue-probe.js';
import { assertQueueSchema, connectionsInUse, queueSchemaVersion } from '../queue/pg-queues.js';
import { queuesCheck } from './redis-checks.js';
import { type Check, check } from './report.js';

/**
 * With QUEUE_BACKEND=postgres: the queues' Postgres answers, its connection keeps a
 * start-up search_path and delivers a NOTIFY to a LISTEN (not a transaction pooler),
 * the queues' schema is migrated to this BullMQ's version, the connections left for a
 * consumer replica, and the queues' counts.
 * Writes nothing but one NOTIFY on a channel of its own.
 */
export async function pgQueueChecks(config: Config, timeoutMs: number): Promise<Check[]> {
  const queues = pgQueuesOf(config);
  const where = redactUrl(queues.url);
  const connection = await connectionCheck(queues, where, timeoutMs);
  if (connection.status === 'fail') {
    return [
      connection,
      check('queues-schema', 'skip', 'not checked: see queues-postgres'),
      check('queues', 'skip', 'not checked: see queues-postgres'),
    ];
  }
  return [
    connection,
    await schemaCheck(queues, timeoutMs),
    await connectionsCheck(queues, timeoutMs),
    await queuesCheck(config, timeoutMs, 'queues-postgres'),
  ];
}

/**
 * How many connections the queues' Postgres has left, against what a consumer replica
 * opens there (CONSUMER.md): a warning when one more replica at the default concurrency
 * would not fit under max_connections (less the superusers' reserve).
 */
async function connectionsCheck(queues: { url: string; schema: string }, timeoutMs: number): Promise<Check> {
  try {
    return connectionsVerdict(await connectionsInUse(queues, timeoutMs));
  } catch (err) {
    return check('queues-connections', 'warn', `could not count the connections: ${(err as Error).message}`);
  }
}

/** The check for `used` of `max` connections: a warning when one more consumer replica would not fit. */
export function connectionsVerdict({ used, max }: { used: number; max: number }): Check {
  const replica = consumerQueueConnections(CONSUMER_DEFAULTS.concurrency);
  const line =
    `${used} of ${max} connections in use; a consumer replica opens up to ${replica} here at ` +
    `concurrency ${CONSUMER_DEFAULTS.concurrency} (2 × (concurrency + 2) + 2), its own pool apart`;
  if (max - used < replica) {
    return check(
      'queues-connections',
      'warn',
      `${line}: one more would not fit`,
      "raise max_connections, lower the consumers' concurrency, or run fewer replicas",
    );
  }
  return check('queues-connections', 'ok', line);
}

async function connectionCheck(
  queues: { url: string; schema: string },
  where: string,
  timeoutMs: number,
): Promise<Check> {
  const problem = await probeQueueConnection(queues, timeoutMs, 'feedsync-doctor');
  if (problem) return check('queues-postgres', 'fail', problem.message, PG_QUEUE_NEEDS);
  return check('queues-postgres', 'ok', `${where}: start-up search_path kept, LISTEN/NOTIFY delivered`);
}

async function schemaCheck(queues: { url: string; schema: string }, timeoutMs: number): Promise<Check> {
  try {
    const { version, latest } = await queueSchemaVersion(queues, timeoutMs);
    if (version === null) {
      return check(
        'queues-schema',
        'fail',
        `schema "${queues.schema}" holds no BullMQ migrations`,
        "run `feedsync migrate` (it migrates the queues' schema too)",
      );
    }
    await assertQueueSchema(queues, timeoutMs);
    const state =
      version < latest ? `, this BullMQ brings ${latest}: \`feedsync migrate\` applies the rest` : '';
    return check(
      'queues-schema',
      version < latest ? 'warn' : 'ok',
      `schema "${queues.schema}" at BullMQ migration ${version}${state}`,
      ...(version < latest ? ['run `feedsync migrate`'] : []),
    );
  } catch (err) {
    return check('queues-schema', 'fail', (err as Error).message, 'run `feedsync migrate`');
  }
}
