/** A job's data: the event with its source. */
export interface JobData {
  source: string;
  id: string;
  type: string;
  /** The envelope's canonical form (feed/timestamp.ts): UTC, milliseconds, or microseconds when it has them. */
  created_at: string;
  data: unknown;
}

/**
 * The job data built by Postgres from a row `e` of events: for the outbox rows a
 * crash left behind, and for requeue. created_at is printed in the canonical form
 * that normaliseTimestamp gives every event, so this and queue/job-data.ts's
 * `jobData` make the same job.
 */
export function jobDataSql(e: string): string {
  const utc = `(${e}.created_at AT TIME ZONE 'UTC')`;
  const fraction =
    `CASE WHEN extract(microseconds FROM ${e}.created_at)::bigint % 1000 = 0 ` +
    `THEN to_char(${utc}, '.MS') ELSE to_char(${utc}, '.US') END`;
  return (
    `jsonb_build_object('source', ${e}.source, 'id', ${e}.id, 'type', ${e}.type, 'created_at', ` +
    `to_char(${utc}, 'YYYY-MM-DD"T"HH24:MI:SS') || ${fraction} || 'Z', 'data', ${e}.data)`
  );
}

/**
 * The job data of an outbox row `o` joined (LEFT) to its event `e`: the copy a row
 * written before schema version 3 carries, else the event's; NULL when the event is gone.
 */
export function outboxJobDataSql(o: string, e: string): string {
  return `COALESCE(${o}.payload, CASE WHEN ${e}.id IS NOT NULL THEN ${jobDataSql(e)} END)`;
}

/** What a job's data adds around its fields' values: its keys, quotes and the timestamp. */
export const JOB_ENVELOPE_BYTES = 100;

/**
 * About the length of the job data of an outbox row `o` joined to its event `e`, as
 * queue/job-data.ts's `jobDataBytes` counts an event in memory (jsonb's text has a space
 * after each colon and comma: a little more). 0 when the event is gone.
 */
export function outboxJobDataBytesSql(o: string, e: string): string {
  return (
    `COALESCE(octet_length(${o}.payload::text), octet_length(${e}.data::text) + octet_length(${e}.id) + ` +
    `octet_length(${e}.type) + octet_length(${e}.source) + ${JOB_ENVELOPE_BYTES}, 0)`
  );
}
