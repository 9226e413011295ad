import type { ServiceEvent } from '../api/types.js';
import type { JobData } from '../store/event-json.js';

/**
 * The job data of an event the worker holds: what it just committed. Postgres builds
 * the same object for rows read back (store/event-json.ts, `jobDataSql`).
 */
export function jobData(source: string, event: ServiceEvent): JobData {
  return { source, id: event.id, type: event.type, created_at: event.created_at, data: event.data };
}
