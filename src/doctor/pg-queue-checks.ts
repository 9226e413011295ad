import { pgQueuesOf } from '../compose/parts.js';
import type { Config } from '../config/config.js';
import { redactUrl } from '../logger.js';
import { PG_QUEUE_NEEDS, probeQueueConnection } from '../queue/pg-queue-probe.js';
import { assertQueueSchema, queueSchemaVersion } from '../queue/pg-queues.js';
import { queuesCheck } from './redis-checks.js';
import { type Check, check } from './report.js';

/**
 * With QUEUE_BACKEND=postgres: the queues' Postgres answers, its connection keeps a
 * start-up search_path and delivers a NOTIFY to a LISTEN (not a transaction pooler),
 * the queues' schema is migrated to this BullMQ's version, and the queues' counts.
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
    await queuesCheck(config, timeoutMs, 'queues-postgres'),
  ];
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
