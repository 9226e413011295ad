export {
  type Applier,
  type ApplierOptions,
  type ApplyBatch,
  type ApplyResult,
  createApplier,
  type EventRoute,
} from './applier.js';
export { type CursorRow, ensureCursor, getCursor, setCursor } from './cursor.js';
export {
  type ConflictsTable,
  type ContactStatusTable,
  type ContactStatusValue,
  type CursorsTable,
  createStore,
  type Database,
  type EmailStatusTable,
  type EmailStatusValue,
  type EventsTable,
  type LeasesTable,
  type OutboxTable,
  type QuarantineTable,
  queryBuilder,
  type SourceCountsTable,
  type Store,
  type StoreOptions,
  type SuppressionReason,
  type SuppressionsTable,
} from './db.js';
export { claimDue, ensureLeaseRows, type LeaseOptions, type SourceLease, takeLease } from './lease.js';
export { migrate, type SchemaState, schemaState } from './migrate.js';
