/**
 * How long BullMQ keeps jobs (seconds): completed ones 7 days and failed ones 30, so
 * jobId de-duplication lasts as long; the retention keeps events at least as long.
 */
export const JOB_RETENTION = {
  removeOnComplete: { age: 7 * 24 * 3600 },
  removeOnFail: { age: 30 * 24 * 3600 },
} as const;
