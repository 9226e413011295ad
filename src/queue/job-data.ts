import type { ServiceEvent } from '../api/types.js';
import { JOB_ENVELOPE_BYTES, type JobData } from '../store/event-json.js';

/**
 * The job data of an event the worker holds: what it just committed. Postgres builds
 * the same object for rows read back (store/event-json.ts, `jobDataSql`).
 */
export function jobData(source: string, event: ServiceEvent): JobData {
  return { source, id: event.id, type: event.type, created_at: event.created_at, data: event.data };
}

/**
 * About the length of an event's job data as JSON: what the relay holds of it in memory
 * and what BullMQ sends, the measure of the relay's byte budgets. The rows it reads back
 * are measured the same way in SQL (`jobDataBytesSql`).
 */
export function jobDataBytes(source: string, event: ServiceEvent): number {
  return (
    JSON.stringify(event.data).length +
    event.id.length +
    event.type.length +
    source.length +
    JOB_ENVELOPE_BYTES
  );
}
