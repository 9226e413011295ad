import { CONFIG_DEFAULTS } from './config-defaults.js';

/**
 * How long BullMQ keeps jobs (seconds): completed ones as long as the
 * outbox keeps a row (7 days, OUTBOX_RETENTION_HOURS's default) and failed ones 30 days, so
 * jobId de-duplication lasts as long; the retention keeps events at least as long.
 */
export const JOB_RETENTION = {
  removeOnComplete: { age: CONFIG_DEFAULTS.OUTBOX_RETENTION_HOURS * 3600 },
  removeOnFail: { age: 30 * 24 * 3600 },
} as const;
