import { type Config, secretsOf } from '../config.js';
import { createLogger, type Logger } from '../logger.js';
import { checkConfig } from './config-check.js';
import { feedCheck } from './feed-check.js';
import { postgresChecks } from './postgres-checks.js';
import { redisChecks } from './redis-checks.js';
import type { Check, DoctorReport } from './report.js';

export interface DoctorOptions {
  /** Loads the configuration; a failure becomes the `config` check. */
  load: () => Config;
  /** Where errors of idle connections go. Default a silent logger. */
  logger?: Logger;
  /** Longest wait for one service to answer. Default 5000 ms. */
  timeoutMs?: number;
}

/**
 * Checks what a deployment needs: the configuration, Postgres and the schema,
 * the cursor against FEED_TYPES, the feed and the key, Redis and its
 * maxmemory-policy, the queues, the outbox and the quarantine. Never writes.
 * Secrets never appear in the report.
 */
export async function runDoctor(opts: DoctorOptions): Promise<DoctorReport> {
  const timeoutMs = opts.timeoutMs ?? 5000;
  const logger = opts.logger ?? createLogger({ level: 'silent' });
  const { config, check: configCheck } = checkConfig(opts.load);
  if (!config) return { ok: false, checks: [configCheck] };
  const [pg, feed, redis] = await Promise.all([
    postgresChecks(config, logger, timeoutMs),
    feedCheck(config, timeoutMs),
    redisChecks(config, timeoutMs),
  ]);
  const scrub = scrubber(secretsOf(config));
  const checks: Check[] = [configCheck, ...pg, feed, ...redis].map((c) => ({
    ...c,
    message: scrub(c.message),
    ...(c.fix === undefined ? {} : { fix: scrub(c.fix) }),
  }));
  return { ok: checks.every((c) => c.status === 'ok' || c.status === 'skip'), checks };
}

/** Error messages from drivers are not ours: take any secret out of them all the same. */
function scrubber(secrets: readonly string[]): (text: string) => string {
  return (text) => {
    let out = text;
    for (const s of secrets) if (out.includes(s)) out = out.split(s).join('[REDACTED]');
    return out;
  };
}
