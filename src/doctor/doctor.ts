import { queueStoreFor } from '../compose/queue-store.js';
import type { Config } from '../config/config-type.js';
import { secretsOf } from '../config/secrets.js';
import { createLogger, type Logger } from '../logger.js';
import { scrubText } from '../scrub.js';
import { checkConfig } from './config-check.js';
import { feedKnowsId, receiverCheck } from './feed-check.js';
import { pgQueueChecks } from './pg-queue-checks.js';
import { postgresChecks } from './postgres-checks.js';
import { redisChecks } from './redis-checks.js';
import type { Check, DoctorReport } from './report.js';
import { sourceFeedChecks, sourcesUnderCheck } from './sources.js';

export interface DoctorOptions {
  /** Loads the configuration; a failure becomes the `config` check. */
  load: () => Config;
  /** Where errors of idle connections go. Default a silent logger. */
  logger?: Logger;
  /** The environment the config came from, to warn of variables feedsync does not read. */
  env?: Record<string, string | undefined>;
  /** Longest wait for one service to answer. Default 5000 ms. */
  timeoutMs?: number;
  /**
   * What the deployment runs: `sync` (default) needs the feed and its key; `receiver`
   * (serve-webhooks alone) needs WEBHOOK_SECRET instead, and no feed.
   */
  mode?: 'sync' | 'receiver';
  /** Check this source alone (`--source`); a name not in FEED_SOURCES_FILE is a failing config check. */
  source?: string;
}

/**
 * How long the sources' checks may take, in timeouts: past it, the sources not yet
 * checked are skip lines. With SOURCE_CONCURRENCY at once, about 8 × 8 sources whose
 * feed takes the whole timeout; a healthy feed answers in far less, so hundreds fit.
 */
const SOURCE_BUDGET_TIMEOUTS = 8;

/**
 * Checks what a deployment needs: the configuration, Postgres and the schema,
 * each source's cursor against its types and its key against its feed, Redis and its
 * maxmemory-policy (or, with QUEUE_BACKEND=postgres, the queues' Postgres, what its
 * connection must allow and the queues' schema), the queues, the outbox and the quarantine. Never writes.
 * Secrets never appear in the report. `ok` only when every check is ok: a check
 * that could not run is not a clean bill of health.
 */
export async function runDoctor(opts: DoctorOptions): Promise<DoctorReport> {
  const timeoutMs = opts.timeoutMs ?? 5000;
  const logger = opts.logger ?? createLogger({ level: 'silent' });
  const source = opts.source;
  // A --source not in the file is a configuration that does not load, for this run.
  const load = (): Config => {
    const loaded = opts.load();
    if (source !== undefined) sourcesUnderCheck(loaded, source);
    return loaded;
  };
  const { config, check: configCheck } = checkConfig(load, opts.env);
  if (!config) return { ok: false, checks: [configCheck] };
  const receiver = opts.mode === 'receiver';
  const sources = sourcesUnderCheck(config, source);
  const deadline = performance.now() + SOURCE_BUDGET_TIMEOUTS * timeoutMs;
  const [pg, feed, redis] = await Promise.all([
    postgresChecks(config, logger, timeoutMs, {
      sources,
      deadline,
      ...(receiver ? {} : { unknownId: (s, id) => feedKnowsId(s.config, id, timeoutMs) }),
    }),
    receiver ? [receiverCheck(config)] : sourceFeedChecks(sources, timeoutMs, deadline),
    // The checks of the queues' store QUEUE_BACKEND names: the store picks its own.
    queueStoreFor(config).pick({ redis: redisChecks, postgres: pgQueueChecks })(config, timeoutMs),
  ]);
  // Error messages from drivers are not ours: take any secret out of them all the same.
  const secrets = secretsOf(config);
  const checks: Check[] = [configCheck, ...pg, ...feed, ...redis].map((c) => ({
    ...c,
    message: scrubText(c.message, secrets),
    ...(c.fix === undefined ? {} : { fix: scrubText(c.fix, secrets) }),
  }));
  return { ok: checks.every((c) => c.status === 'ok'), checks };
}
